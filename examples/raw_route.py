"""Raw message handler: a route hands each `Message` to a Python function.

    python examples/raw_route.py

A memory route (in-process topics, no server) runs on its own thread. The handler reads
the payload lazily with `message.json()`, and answers with `message.with_json(...)`, which
keeps the message's id and metadata. A pull `Consumer` then reads what the route produced.
"""

from __future__ import annotations

from mq_bridge import Consumer, Message, Publisher, Route

CONFIG = {
    "routes": {
        "greet": {
            "input": {"memory": {"topic": "names"}},
            "output": {"memory": {"topic": "greetings"}},
        }
    }
}


def greet(message: Message) -> Message:
    """Turn ``{"name": ...}`` into a greeting; the id and metadata are kept."""
    person = message.json()
    return message.with_json({"greeting": f"Hello, {person['name']}!", "id": message.id})


def main() -> None:
    publisher = Publisher.from_config({"memory": {"topic": "names"}})
    with Route.from_config(CONFIG, "greet").with_handler(greet):
        for name in ("Ada", "Grace", "Linus"):
            publisher.send_json({"name": name}, {"source": "raw_route.py"})
        with Consumer.from_config({"memory": {"topic": "greetings"}}) as consumer:
            received: list[Message] = []
            while len(received) < 3:
                received += consumer.poll(max=10, timeout_ms=5000)
            consumer.commit()
    for message in received:
        print(message.json()["greeting"], "metadata:", message.metadata)


if __name__ == "__main__":
    main()
