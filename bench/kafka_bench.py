"""Kafka throughput through the seed's public API only, so one script measures us and the
peer (mq-bridge 1.2.0 in its own venv):

    .peers/mq-bridge/bin/python bench/kafka_bench.py --scenario all
    .venv/bin/python bench/kafka_bench.py --scenario all

Scenarios (~100 B JSON, the local Kafka-protocol server (Tansu), 6-partition topics made by
the endpoint; median of --runs):

    route       Kafka -> route(with_handler returning the message) -> Kafka, batch 512, over
                a pre-filled backlog; timed from the first message a Consumer on the output
                topic reads until it has read every message (so neither side's consumer-group
                join, ~3 s on Tansu, is counted)
    send-json   Publisher.send_json one at a time, each waiting for its delivery report
    send-batch  Publisher.send_batch of 500
    poll        Consumer.poll(max=500) + commit() over a pre-filled topic, timed from the first
                non-empty poll (the group join is not counted)

Group members use session.timeout.ms 6000 / heartbeat.interval.ms 1000 (shared/BROKERS.md:
Tansu's join takes about half the session timeout). Each run deletes its topics with plain
confluent-kafka where it is installed (our venv), with the consumer groups named after them;
the peer's venv has no confluent-kafka, so after a peer run delete its topics and groups
with ``.venv/bin/python bench/kafka_bench.py --cleanup``.
The machine is shared: alternate ours and the peer one run at a time and compare medians.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from harness import DOC, KIND, close, fill, run_scenarios
from mq_bridge import Consumer, Publisher, Route

URL = "127.0.0.1:9092"
SESSION = [["session.timeout.ms", "6000"], ["heartbeat.interval.ms", "1000"]]
PREFIX = "bench-kafka-"


def config(topic: str, group: str | None = None) -> dict:
    options: dict = {"url": URL, "topic": topic, "consumer_options": SESSION}
    if group is not None:
        options["group_id"] = group
    return {"kafka": options}


def delete_topics(*topics: str) -> None:
    """Delete the run's topics and the consumer groups named after them (plain
    confluent-kafka; skipped where it is not installed: the server is shared, and a group
    left behind stays in its memory)."""
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        return
    admin = AdminClient({"bootstrap.servers": URL, "logger": logging.getLogger("bench")})
    for topic, future in admin.delete_topics(list(topics), operation_timeout=10).items():
        try:
            future.result(15)
        except Exception as error:
            print(f"could not delete {topic}: {error}", file=sys.stderr)
    delete_groups(admin, lambda group: group.startswith(topics))


def delete_groups(admin: Any, wanted: Callable[[str], bool]) -> int:
    """Delete the consumer groups whose names `wanted` accepts; how many."""
    try:
        listed = admin.list_consumer_groups(request_timeout=10).result(15)
    except Exception as error:
        print(f"could not list consumer groups: {error}", file=sys.stderr)
        return 0
    groups = sorted(g.group_id for g in listed.valid if wanted(g.group_id))
    if groups:
        for group, future in admin.delete_consumer_groups(groups, request_timeout=10).items():
            try:
                future.result(15)
            except Exception as error:
                print(f"could not delete group {group}: {error}", file=sys.stderr)
    return len(groups)


def timed_drain(cfg: dict, count: int, timeout: float = 180.0) -> tuple[int, float]:
    """Read `count` messages (poll(max=500) + commit()); (how many, seconds from the first)."""
    consumer = Consumer.from_config(cfg)
    seen, first, deadline = 0, None, time.monotonic() + timeout
    while seen < count and time.monotonic() < deadline:
        batch = consumer.poll(max=500, timeout_ms=1000)
        if batch and first is None:
            first = time.perf_counter()
        for message in batch:
            _ = message.payload
        seen += len(batch)
        consumer.commit()
    elapsed = time.perf_counter() - (first or time.perf_counter())
    close(consumer)
    return seen, elapsed


def unique(kind: str) -> str:
    return f"{PREFIX}{kind}-{uuid.uuid4().hex[:8]}"


def route_run(count: int) -> float:
    source, sink = unique("in"), unique("out")
    try:
        fill(config(source), count)
        route = Route.from_config(
            {"input": config(source, f"{source}-route"), "output": config(sink), "batch_size": 512}
        ).with_handler(lambda message: message)
        route.start()
        seen, elapsed = timed_drain(config(sink, f"{sink}-reader"), count)
        route.stop()
        route.join()  # closed (its group left) before the topics and groups are deleted
        if seen != count:
            sys.exit(f"routed {seen} of {count}")
        return count / elapsed
    finally:
        delete_topics(source, sink)


def send_json_run(count: int) -> float:
    topic = unique("send")
    try:
        publisher = Publisher.from_config(config(topic))
        publisher.send_json(DOC, KIND)  # connected and warm
        started = time.perf_counter()
        for n in range(count):
            DOC["n"] = n
            publisher.send_json(DOC, KIND)
        elapsed = time.perf_counter() - started
        close(publisher)
        return count / elapsed
    finally:
        delete_topics(topic)


def send_batch_run(count: int) -> float:
    topic = unique("batch")
    try:
        publisher = Publisher.from_config(config(topic))
        payloads = []
        for n in range(count):
            DOC["n"] = n
            payloads.append(json.dumps(DOC).encode())
        publisher.send_batch(payloads[:500])  # connected and warm
        started = time.perf_counter()
        for start in range(0, count, 500):
            publisher.send_batch(payloads[start : start + 500])
        elapsed = time.perf_counter() - started
        close(publisher)
        return count / elapsed
    finally:
        delete_topics(topic)


def poll_run(count: int) -> float:
    topic = unique("poll")
    try:
        fill(config(topic), count)
        seen, elapsed = timed_drain(config(topic, f"{topic}-reader"), count)
        if seen != count:
            sys.exit(f"polled {seen} of {count}")
        return count / elapsed
    finally:
        delete_topics(topic)


def cleanup() -> None:
    """Delete every topic and group a benchmark run left behind (a peer run cannot delete
    its own)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": URL})
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(PREFIX)]
    if topics:
        delete_topics(*topics)
    groups = delete_groups(admin, lambda group: group.startswith(PREFIX))
    print(f"deleted {len(topics)} topic(s) and {groups} more group(s)")


SCENARIOS = {
    "route": (route_run, 100_000),
    "send-json": (send_json_run, 5_000),
    "send-batch": (send_batch_run, 100_000),
    "poll": (poll_run, 100_000),
}


if __name__ == "__main__":
    if "--cleanup" in sys.argv:
        cleanup()
    else:
        run_scenarios(__doc__, SCENARIOS)
