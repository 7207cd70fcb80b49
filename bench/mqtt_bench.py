"""MQTT endpoint throughput (Mosquitto on 127.0.0.1:1883, v5, QoS 1), seed public API only.

One script measures us and the peer (mq-bridge 1.2.0 in its own venv), in the same sitting:

    $(scripts/peer-venv.sh mq-bridge) bench/mqtt_bench.py --scenario all
    .venv/bin/python bench/mqtt_bench.py --scenario all

Scenarios (~100 B JSON; each figure is the median of --runs):

    route       MQTT -> route(with_handler returning the message) -> MQTT, batch 500; the
                feeder sends batches of 500 and keeps at most 1000 messages ahead of the
                drain (Mosquitto drops what a slow session has queued past 1000)
    send-json   Publisher.send_json one at a time, each waiting for its PUBACK
    send-batch  Publisher.send_batch of 500
    poll        Consumer.poll(max=500) + commit() over a backlog the consumer already holds
                (queue_capacity = backlog, as mq-bridge needs)
    poll-paho   the same drain with paho-mqtt alone (manual acks): the reference; runs only
                where paho-mqtt is importable (our venv)

Every topic and session is unique and dropped at the end (a clean start of its client id).
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

from harness import run_scenarios
from mq_bridge import Consumer, Message, Publisher, Route

URL = "tcp://127.0.0.1:1883"
DOC = {"order_id": 0, "customer": "c-000042", "sku": "SKU-7731-BLUE", "amount": 129.95, "n": 0}
META = {"kind": "order.created"}
PAYLOAD = b'{"order_id":0,"customer":"c-000042","sku":"SKU-7731-BLUE","amount":129.95,"n":0}'


def endpoint(tag: str, **options: Any) -> dict[str, Any]:
    name = f"bench-{tag}-{uuid.uuid4().hex[:8]}"
    return {"mqtt": {"url": URL, "topic": f"bench/{name}", "client_id": name, **options}}


def drop_session(config: dict[str, Any]) -> None:
    consumer = Consumer.from_config({"mqtt": {**config["mqtt"], "clean_session": True}})
    consumer.close()


def drain(consumer: Any, count: int, timeout: float = 60.0) -> int:
    got, deadline = 0, time.monotonic() + timeout
    while got < count and time.monotonic() < deadline:
        batch = consumer.poll(max=500, timeout_ms=1000)
        got += len(batch)
        if batch:
            consumer.commit()
    return got


def route_run(count: int) -> float:
    source, sink = endpoint("in", queue_capacity=1000), endpoint("out", queue_capacity=1000)
    out = Consumer.from_config(sink)
    route = Route.from_config({"input": source, "output": sink, "batch_size": 500})
    route.with_handler(lambda message: message)
    publisher_topic = {"mqtt": {**source["mqtt"], "client_id": None}}
    publisher = Publisher.from_config(publisher_topic)
    try:
        route.start()
        started, sent, drained = time.perf_counter(), 0, 0
        while sent < count:
            batch = [Message(PAYLOAD, META) for _ in range(min(500, count - sent))]
            publisher.send_batch(batch)
            sent += len(batch)
            if sent - drained > 1000:
                drained += drain(out, sent - drained - 500)
        drained += drain(out, count - drained)
        elapsed = time.perf_counter() - started
    finally:
        route.stop()
        out.close()
        drop_session(source)
        drop_session(sink)
    if drained < count:
        sys.exit(f"route: drained {drained} of {count}")
    return count / elapsed


def send_json_run(count: int) -> float:
    config = endpoint("send")
    publisher = Publisher.from_config(config)
    started = time.perf_counter()
    for n in range(count):
        DOC["n"] = n
        publisher.send_json(DOC, META)
    return count / (time.perf_counter() - started)


def send_batch_run(count: int) -> float:
    publisher = Publisher.from_config(endpoint("batch"))
    batches = [[Message(PAYLOAD, META) for _ in range(500)] for _ in range(count // 500)]
    started = time.perf_counter()
    for batch in batches:
        publisher.send_batch(batch)
    return count // 500 * 500 / (time.perf_counter() - started)


def poll_run(count: int) -> float:
    config = endpoint("poll", queue_capacity=count)
    consumer = Consumer.from_config(config)
    try:
        publisher = Publisher.from_config({"mqtt": {**config["mqtt"], "client_id": None}})
        for start in range(0, count, 500):
            publisher.send_batch([Message(PAYLOAD, META) for _ in range(min(500, count - start))])
        time.sleep(1.0)  # the backlog reaches the consumer's buffer
        started = time.perf_counter()
        got = drain(consumer, count)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
        drop_session(config)
    if got < count:
        sys.exit(f"poll: got {got} of {count}")
    return count / elapsed


def poll_paho_run(count: int) -> float:
    """Raw paho-mqtt: manual acks, the same backlog and drain (the reference)."""
    import paho.mqtt.client as paho  # only in our venv; main() skips this elsewhere

    topic, name = f"bench/paho-{uuid.uuid4().hex[:8]}", f"paho-{uuid.uuid4().hex[:8]}"
    received: list[Any] = []
    client = paho.Client(
        paho.CallbackAPIVersion.VERSION2, client_id=name, protocol=paho.MQTTv5, manual_ack=True
    )
    client.on_message = lambda _c, _u, message: received.append(message)
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    properties = Properties(PacketTypes.CONNECT)
    properties.ReceiveMaximum = min(count, 65535)
    client.connect("127.0.0.1", 1883, properties=properties)
    client.loop_start()
    client.subscribe(topic, 1)
    time.sleep(0.3)
    publisher = Publisher.from_config({"mqtt": {"url": URL, "topic": topic}})
    for start in range(0, count, 500):
        publisher.send_batch([Message(PAYLOAD, META) for _ in range(min(500, count - start))])
    time.sleep(1.0)
    started, acked = time.perf_counter(), 0
    deadline = time.monotonic() + 60
    while acked < count and time.monotonic() < deadline:
        for message in received[acked : acked + 500]:
            message.payload  # noqa: B018 - read it, as the other scenarios do
            client.ack(message.mid, 1)
            acked += 1
    elapsed = time.perf_counter() - started
    client.disconnect()
    client.loop_stop()
    return count / elapsed


SCENARIOS = {
    "route": (route_run, 20_000),
    "send-json": (send_json_run, 10_000),
    "send-batch": (send_batch_run, 20_000),
    "poll": (poll_run, 2_000),
    "poll-paho": (poll_paho_run, 2_000),
}


def _skip(name: str) -> str | None:
    if name == "poll-paho" and not _has_paho():
        return "paho-mqtt is not importable here"
    return None


def _has_paho() -> bool:
    try:
        import paho.mqtt.client  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    run_scenarios(__doc__, SCENARIOS, _skip)
