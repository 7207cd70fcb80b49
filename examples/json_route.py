"""Kind-based JSON handler: `add_handler(kind, fn)` dispatches on the ``kind`` metadata.

    python examples/json_route.py

Each handler receives the decoded JSON value and returns a JSON value (or None to drop
the message); the result keeps the input's id and metadata. Messages of a kind with no
handler go to the raw handler given to `with_handler`, when there is one.
"""

from __future__ import annotations

from typing import Any

from mq_bridge import Consumer, Message, Publisher, Route

CONFIG = """
routes:
  orders:
    input: {memory: {topic: shop.events}}
    output: {memory: {topic: shop.processed}}
"""


def order_created(order: dict[str, Any]) -> dict[str, Any]:
    """Price the order."""
    return {**order, "total": order["quantity"] * order["unit_price"], "status": "priced"}


def order_cancelled(order: dict[str, Any]) -> dict[str, Any]:
    """Mark the cancellation."""
    return {"order_id": order["order_id"], "status": "cancelled"}


def anything_else(message: Message) -> None:
    """Kinds without a handler arrive here as raw messages; returning None drops them."""
    print(f"ignored a {message.get('kind', 'message without a kind')}")


def main() -> None:
    route = (
        Route.from_str(CONFIG, "orders")
        .with_handler(anything_else)  # first: a later with_handler replaces kind handlers
        .add_handler("order.created", order_created)
        .add_handler("order.cancelled", order_cancelled)
    )
    publisher = Publisher.from_config({"memory": {"topic": "shop.events"}})
    with route:
        publisher.send_json(
            {"order_id": 1, "quantity": 3, "unit_price": 5}, {"kind": "order.created"}
        )
        publisher.send_json(
            {"order_id": 2, "quantity": 1, "unit_price": 9}, {"kind": "order.created"}
        )
        publisher.send_json({"order_id": 1}, {"kind": "order.cancelled"})
        publisher.send_json({"ping": True}, {"kind": "heartbeat"})
        with Consumer.from_config({"memory": {"topic": "shop.processed"}}) as consumer:
            results: list[Message] = []
            while len(results) < 3:
                results += consumer.poll(max=10, timeout_ms=5000)
            consumer.commit()
    for message in results:
        print(message.get("kind"), message.json())


if __name__ == "__main__":
    main()
