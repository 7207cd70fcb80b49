"""The `file` endpoint through the public API: Publisher, Consumer, Route, config files."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.errors import ClosedError


def test_the_readme_consumer_loop_ends_when_the_file_is_read(tmp_path: Path) -> None:
    path = str(tmp_path / "orders" / "orders.jsonl")
    with Publisher.from_config({"file": {"path": path}}) as publisher:
        for number in range(1000):
            publisher.send_json({"order_id": number}, {"kind": "order.created"})
    seen = []
    with Consumer.from_config({"file": {"path": path, "mode": "consume"}}) as consumer:
        while not consumer.exhausted:
            batch = consumer.poll(max=300, timeout_ms=1000)
            if not batch:
                continue
            seen += [(m.json()["order_id"], m.metadata["kind"]) for m in batch]
            consumer.commit()
    assert seen == [(number, "order.created") for number in range(1000)]


def test_a_group_consumer_resumes_after_its_last_commit(tmp_path: Path) -> None:
    path = str(tmp_path / "events.log")
    config = {"file": {"path": path, "mode": "group_subscribe", "group_id": "loader"}}
    with Publisher.from_config({"file": {"path": path}}) as publisher:
        publisher.send_batch([Message(f"e{i}".encode()) for i in range(6)])
    with Consumer.from_config(config) as consumer:
        assert [m.payload for m in consumer.poll(max=4, timeout_ms=2000)] == [
            b"e0",
            b"e1",
            b"e2",
            b"e3",
        ]
        consumer.commit()
        consumer.poll(max=2, timeout_ms=2000)  # handed out, never committed
    with Consumer.from_config(config) as consumer:
        assert [m.payload for m in consumer.poll(max=10, timeout_ms=2000)] == [b"e4", b"e5"]
        assert not consumer.exhausted
        consumer.commit()


def test_a_route_reads_a_file_into_memory_and_stops_when_it_is_exhausted(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    topic = f"file-route-{uuid.uuid4().hex[:8]}"
    with Publisher.from_config({"file": {"path": str(source)}}) as publisher:
        for number in range(500):
            publisher.send_json({"n": number})
    route = Route.from_config(
        {
            "input": {"file": {"path": str(source), "mode": "consume"}},
            "output": {"memory": {"topic": topic, "capacity": 0}},
        }
    ).with_handler(lambda message: message.with_json({"n": message.json()["n"] * 2}))
    route.start()
    route.join(timeout=60)
    assert not route.running
    with Consumer.from_config({"memory": {"topic": topic}}) as consumer:
        got = consumer.poll(max=1000, timeout_ms=1000)
        consumer.commit()
    assert [m.json()["n"] for m in got] == [2 * number for number in range(500)]


def test_a_route_writes_a_file_that_a_consumer_reads_back(tmp_path: Path) -> None:
    topic = f"to-file-{uuid.uuid4().hex[:8]}"
    target = tmp_path / "out" / "copy.jsonl"
    route = Route.from_config(
        {"input": {"memory": {"topic": topic}}, "output": {"file": {"path": str(target)}}}
    )
    with route, Publisher.from_config({"memory": {"topic": topic}}) as publisher:
        for number in range(100):
            publisher.send_json({"n": number}, {"seq": str(number)})
        consumer = Consumer.from_config({"file": {"path": str(target), "mode": "consume"}})
        got: list[Message] = []
        deadline = time.monotonic() + 60
        while len(got) < 100 and time.monotonic() < deadline:
            got += consumer.poll(max=100, timeout_ms=1000)
            consumer.commit()
        consumer.close()
    assert [(m.json()["n"], m.metadata["seq"]) for m in got] == [
        (number, str(number)) for number in range(100)
    ]


def test_publishers_and_consumers_sections_of_a_yaml_file(tmp_path: Path) -> None:
    data = tmp_path / "data.log"
    config = tmp_path / "bridge.yaml"
    config.write_text(
        f"""
publishers:
  audit:
    file: {{path: "{data}", format: raw, fsync: batch}}
consumers:
  audit:
    file: {{path: "{data}", format: raw, mode: consume}}
"""
    )
    with Publisher.from_file(str(config), "audit") as publisher:
        publisher.send(b"line one")
        publisher.send(b"line two")
    with Consumer.from_file(str(config), "audit") as consumer:
        assert [m.text() for m in consumer.poll(max=10, timeout_ms=2000)] == [
            "line one",
            "line two",
        ]
        consumer.commit()
        assert consumer.exhausted


def test_send_json_writes_what_send_of_the_same_message_writes(tmp_path: Path) -> None:
    """The file endpoint's own send_json path: same bytes, same checks, same errors."""
    uid = uuid.uuid4()
    values = [
        ({"n": 1, "s": 'quote " \\ \u00e9 \n'}, {"kind": "k", "x": "\ud800"}),
        ([1, 2.5, None, 2**70], None),  # 2**70: orjson refuses, the stdlib fallback writes it
        ({1: "non-string key"}, {}),
    ]
    via_json, via_send = tmp_path / "json.log", tmp_path / "send.log"
    with Publisher.from_config({"file": {"path": str(via_json), "linger_ms": 0}}) as publisher:
        for data, metadata in values:
            publisher.send_json(data, metadata, id=uid)
        with pytest.raises(ValueError, match="not JSON-serializable"):
            publisher.send_json({"bad": object()})
        with pytest.raises(TypeError, match="metadata must map str to str"):
            publisher.send_json({"n": 1}, {"k": 1})  # type: ignore[dict-item]
    with Publisher.from_config({"file": {"path": str(via_send)}}) as publisher:
        for data, metadata in values:
            publisher.send(Message.from_json(data, metadata, uid))
    assert via_json.read_bytes() == via_send.read_bytes()
    assert via_json.read_bytes().count(b"\n") == len(values)


def test_send_json_with_a_text_delimiter_refuses_a_record_that_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "pipes.log"
    with Publisher.from_config({"file": {"path": str(path), "delimiter": "|"}}) as publisher:
        publisher.send_json({"a": 1})
        with pytest.raises(ValueError, match="contains the delimiter"):
            publisher.send_json({"a": "x|y"})
    with Consumer.from_config({"file": {"path": str(path), "delimiter": "|"}}) as consumer:
        assert [m.json() for m in consumer.poll(max=10, timeout_ms=2000)] == [{"a": 1}]


def test_send_json_after_close_raises_closed(tmp_path: Path) -> None:
    publisher = Publisher.from_config({"file": {"path": str(tmp_path / "x.log")}})
    publisher.close()
    with pytest.raises(ClosedError):
        publisher.send_json({"a": 1})


def test_a_returning_send_has_written_its_record(tmp_path: Path) -> None:
    """No write-behind by default: the record is in the file when `send` returns."""
    path = tmp_path / "now.jsonl"
    with Publisher.from_config({"file": {"path": str(path)}}) as publisher:
        publisher.send_json({"n": 1})
        assert path.read_bytes().count(b"\n") == 1
        publisher.send(Message(b"two"))
        assert path.read_bytes().count(b"\n") == 2


def test_sent_records_survive_the_process_dying_right_after_send(tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    script = (
        "import os, sys\n"
        "from mq_bridge import Publisher\n"
        "p = Publisher.from_config({'file': {'path': sys.argv[1]}})\n"
        "for n in range(100):\n"
        "    p.send_json({'n': n})\n"
        "os._exit(0)  # no close, no flush, no atexit: as if killed\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=60)
    lines = path.read_bytes().splitlines()
    assert [json.loads(json.loads(line)["payload"])["n"] for line in lines] == list(range(100))
