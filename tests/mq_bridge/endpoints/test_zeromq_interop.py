"""Interop with the peers over ZeroMQ: mq-bridge 1.2.0 (and mq-bridge-py 0.3.2's wire form).

Each peer runs in its own venv (`tests/peers.py`) as a subprocess on a free loopback port;
our side runs in this process. Checked both ways: payload, id and metadata (the `json`
format carries all three; `raw_framed`, 1.2.0's default, carries payload and metadata),
and request/reply (a REQ on one side, a REP route with a `response` output on the other).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mq_bridge import Message, Route
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests import peers
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_zeromq import receive_n, zeromq

PEER_SCRIPT = r"""
import json, sys, time
from mq_bridge import Consumer, Message, Publisher, Route
mode, config = sys.argv[1], json.loads(sys.argv[2])
if mode == "publish":
    publisher = Publisher.from_config(config)
    print("ready", flush=True)
    sys.stdin.readline()  # our side is listening
    for item in json.loads(sys.argv[3]):
        publisher.send(Message(item["payload"].encode(), item["metadata"], id=item["id"]))
    time.sleep(0.5)
elif mode == "consume":
    got = []
    with Consumer.from_config(config) as consumer:
        print("ready", flush=True)
        deadline = time.monotonic() + 20
        while len(got) < int(sys.argv[3]) and time.monotonic() < deadline:
            for m in consumer.poll(max=10, timeout_ms=500):
                got.append({"id": m.id, "payload": m.payload.decode(), "metadata": m.metadata})
            consumer.commit()
    print(json.dumps(got), flush=True)
elif mode == "request":
    publisher = Publisher.from_config(config)
    print("ready", flush=True)
    sys.stdin.readline()
    reply = publisher.request(Message(b"ping", {"k": "v"}, id=sys.argv[3]))
    print(json.dumps({"id": reply.id, "payload": reply.payload.decode(),
                      "metadata": reply.metadata}), flush=True)
elif mode == "respond":
    route = Route.from_config({"input": config, "output": {"response": {}}})
    route = route.with_handler(lambda m: m.with_payload(m.payload.upper()))
    route.start()
    print("ready", flush=True)
    sys.stdin.readline()  # until we are done
    route.stop()
"""

SENT = [
    {"id": "01a232b2-4e7b-722a-97b2-17be9a9c6262", "payload": '{"a":1}', "metadata": {"k": "v"}},
    {"id": "01a232b2-4e7b-722a-97b2-17be9a9c6263", "payload": "two", "metadata": {}},
]


@pytest.fixture
def peer() -> Iterator[Any]:
    """Starts peer scripts in the background; each answers `ready` once set up."""
    running: list[subprocess.Popen[str]] = []
    directory = tempfile.TemporaryDirectory()

    def start(name: str, *args: str, script: str = PEER_SCRIPT) -> subprocess.Popen[str]:
        python = peers.peer_python(name)
        process = subprocess.Popen(
            [python, "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=directory.name,
            env=peers.peer_environment(),
        )
        running.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == "ready", process.stderr.read() if process.stderr else ""
        return process

    yield start
    for process in running:
        if process.poll() is None:
            process.kill()
        process.wait(10)
    directory.cleanup()


def go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("\n")
    process.stdin.flush()


def finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err[-3000:]
    return out


def as_dicts(messages: list[Message]) -> list[dict[str, Any]]:
    return [{"id": m.id, "payload": m.payload.decode(), "metadata": m.metadata} for m in messages]


@pytest.mark.parametrize("name", ["mq-bridge", "mq-bridge-py"])
def test_peer_push_json_to_our_pull(peer: Any, name: str) -> None:
    port = free_port()
    source = build_input(zeromq(port, bind=True), new_context("interop"))
    source.connect()
    try:
        options = {"url": f"tcp://127.0.0.1:{port}", "socket_type": "push"}
        if name == "mq-bridge":
            options["format"] = "json"  # 1.2.0's default is raw_framed
        process = peer(name, "publish", json.dumps({"zeromq": options}), json.dumps(SENT))
        go(process)
        got = receive_n(source, len(SENT))
        finish(process)
    finally:
        source.close()
    assert as_dicts(got) == SENT


def test_our_push_json_to_peer_pull(peer: Any) -> None:
    port = free_port()
    config = {"url": f"tcp://127.0.0.1:{port}", "socket_type": "pull", "bind": True}
    process = peer(
        "mq-bridge", "consume", json.dumps({"zeromq": {**config, "format": "json"}}), "2"
    )
    sink = build_output(zeromq(port), new_context("interop"))
    sink.connect()
    try:
        sink.send([Message(m["payload"].encode(), m["metadata"], id=m["id"]) for m in SENT])
        got = json.loads(finish(process).strip().splitlines()[-1])
    finally:
        sink.close()
    assert got == SENT


def test_peer_default_raw_framed_to_ours_and_back(peer: Any) -> None:
    """1.2.0's default format carries payload and metadata (no id) in both directions."""
    port = free_port()
    source = build_input(zeromq(port, bind=True, format="raw_framed"), new_context("interop"))
    source.connect()
    try:
        options = {"url": f"tcp://127.0.0.1:{port}", "socket_type": "push"}
        process = peer("mq-bridge", "publish", json.dumps({"zeromq": options}), json.dumps(SENT))
        go(process)
        got = receive_n(source, len(SENT))
        finish(process)
    finally:
        source.close()
    assert [(m.payload.decode(), m.metadata) for m in got] == [
        (m["payload"], m["metadata"]) for m in SENT
    ]
    port = free_port()
    config = {"url": f"tcp://127.0.0.1:{port}", "socket_type": "pull", "bind": True}
    process = peer("mq-bridge", "consume", json.dumps({"zeromq": config}), "2")
    sink = build_output(zeromq(port, format="raw_framed"), new_context("interop"))
    sink.connect()
    try:
        sink.send([Message(m["payload"].encode(), m["metadata"]) for m in SENT])
        back = json.loads(finish(process).strip().splitlines()[-1])
    finally:
        sink.close()
    assert [(m["payload"], m["metadata"]) for m in back] == [
        (m["payload"], m["metadata"]) for m in SENT
    ]


def test_peer_request_to_our_rep_route(peer: Any) -> None:
    port = free_port()
    route = Route.from_config(
        {"input": zeromq(port, bind=True, socket_type="rep"), "output": {"response": {}}}
    ).with_handler(lambda m: m.with_payload(m.payload.upper()).with_metadata(answered="yes"))
    request_id = "01a232b2-4e7b-722a-97b2-17be9a9c6264"
    with route:
        options = {"url": f"tcp://127.0.0.1:{port}", "socket_type": "req", "format": "json"}
        process = peer("mq-bridge", "request", json.dumps({"zeromq": options}), request_id)
        go(process)
        reply = json.loads(finish(process).strip().splitlines()[-1])
    assert reply["payload"] == "PING"
    assert reply["id"] == request_id
    assert reply["metadata"]["k"] == "v" and reply["metadata"]["answered"] == "yes"


def test_our_request_to_a_peer_rep_route(peer: Any) -> None:
    port = free_port()
    options = {"url": f"tcp://127.0.0.1:{port}", "socket_type": "rep", "bind": True}
    process = peer("mq-bridge", "respond", json.dumps({"zeromq": {**options, "format": "json"}}))
    requester = build_output(zeromq(port, socket_type="req"), new_context("interop"))
    requester.connect()
    try:
        request = Message(b"hello", {"k": "v"})
        deadline = time.monotonic() + 10
        reply = requester.request(request, max(0.1, deadline - time.monotonic()))
    finally:
        requester.close()
        go(process)
        finish(process)
    assert reply.payload == b"HELLO"
    assert reply.metadata["k"] == "v"
    assert reply.id == request.id
