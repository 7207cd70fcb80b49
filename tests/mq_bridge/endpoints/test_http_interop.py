"""Interop with the peer, mq-bridge 1.2.0 (its own venv), over HTTP on loopback.

Both directions: the peer's http output sends to our http input, and our http output
sends to the peer's http input; payload and metadata (headers) arrive intact both ways,
and the id where the wire carries it: ours sends a ``message-id`` header, which the peer's
input reads; the peer's output sends none. Then request/reply across: our `request`
answered by a peer route ending in `response`, and the peer's `request` answered by ours.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from tests import peers
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_http import http_config, serving

PEER_SCRIPT = r"""
import json, sys
from mq_bridge import Consumer, Message, Publisher, Route
mode, config = sys.argv[1], json.loads(sys.argv[2])
if mode == "publish":
    publisher = Publisher.from_config(config)
    for item in json.loads(sys.argv[3]):
        publisher.send(Message(bytes.fromhex(item["payload"]), item["metadata"], id=item["id"]))
    print("sent", flush=True)
elif mode == "request":
    publisher = Publisher.from_config(config)
    reply = publisher.request(Message(b"ping", {"kind": "probe"}))
    print(json.dumps({"payload": reply.payload.hex(), "metadata": dict(reply.metadata)}))
elif mode == "collect":  # a route printing each message as a JSON line, until stdin closes
    def show(m):
        item = {"payload": m.payload.hex(), "id": str(m.id), "metadata": dict(m.metadata)}
        print(json.dumps(item), flush=True)
    with Route.from_config({"input": config, "output": {"null": None}}).with_handler(show):
        print("ready", flush=True)
        sys.stdin.read()
else:  # respond: a route answering with the payload upper-cased, until stdin closes
    route = Route.from_config({"input": config, "output": {"response": {}}})
    route = route.with_handler(lambda m: m.with_payload(m.payload.upper()))
    with route:
        print("ready", flush=True)
        sys.stdin.read()
"""

SENT = [
    Message(b'{"order": 1}', {"kind": "order.created", "tenant": "t1"}),
    Message(b"\xff\x00binary", {"kind": "blob"}),
    Message("ünïcode text".encode(), {"kind": "text"}),
]


@pytest.fixture(scope="module")
def peer_python() -> str:
    return peers.peer_python("mq-bridge")


@contextmanager
def peer_process(python: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """The peer script running in the background; waits for its "ready" line."""
    with tempfile.TemporaryDirectory() as directory:
        process = subprocess.Popen(
            [python, "-c", PEER_SCRIPT, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=directory,
            env=peers.peer_environment(),
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.strip() == "ready", f"the peer failed: {process.stderr.read()[-3000:]}"  # type: ignore[union-attr]
            yield process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(10)


def as_wire(messages: list[Message]) -> list[dict[str, Any]]:
    return [
        {"payload": m.payload.hex(), "id": m.assigned_id(), "metadata": m.metadata}
        for m in messages
    ]


def test_the_peer_s_http_output_reaches_our_input(peer_python: str) -> None:
    port = free_port()
    topic = f"http-interop-{port}"
    route = {"input": http_config(port, path="/in"), "output": {"memory": {"topic": topic}}}
    target = json.dumps({"http": {"url": f"http://127.0.0.1:{port}/in"}})
    with Route.from_config(route), Consumer.from_config({"memory": {"topic": topic}}) as out:
        output = peers.run_peer(
            peer_python, PEER_SCRIPT, "publish", target, json.dumps(as_wire(SENT))
        )
        assert "sent" in output
        got = out.poll(max=10, timeout_ms=5000)
    assert [m.payload for m in got] == [m.payload for m in SENT]
    for sent, received in zip(SENT, got, strict=True):
        # mq-bridge 1.2.0's http output sends no id header (its wire does not carry the
        # id), so each request gets a new id here, as it does on the peer's input.
        assert received.id is not None
        for key, value in sent.metadata.items():
            assert received.metadata[key] == value


def test_our_http_output_reaches_the_peer_s_input(peer_python: str) -> None:
    port = free_port()
    config = json.dumps(http_config(port, path="/in"))
    with peer_process(peer_python, "collect", config) as process:
        with Publisher.from_config({"http": {"url": f"http://127.0.0.1:{port}/in"}}) as pub:
            for message in SENT:
                pub.send(message)
        assert process.stdout is not None
        got = [json.loads(process.stdout.readline()) for _ in SENT]
    assert [bytes.fromhex(m["payload"]) for m in got] == [m.payload for m in SENT]
    for sent, received in zip(SENT, got, strict=True):
        assert received["id"] == sent.id
        for key, value in sent.metadata.items():
            assert received["metadata"][key] == value


def test_our_request_is_answered_by_a_peer_route(peer_python: str) -> None:
    port = free_port()
    target = {"http": {"url": f"http://127.0.0.1:{port}/rr"}}
    config = json.dumps(http_config(port, path="/rr"))
    with peer_process(peer_python, "respond", config), Publisher.from_config(target) as pub:
        request = Message(b"hello", {"kind": "greeting"})
        reply = pub.request(request)
    assert reply.payload == b"HELLO"
    assert reply.metadata["http_status"] == "200"
    assert reply.id == request.id


def test_the_peer_s_request_is_answered_by_our_route(peer_python: str) -> None:
    port = free_port()
    handler = lambda m: m.with_payload(m.payload.upper()).with_metadata({"x-answer": "42"})  # noqa: E731
    with serving(handler, port, path="/rr"):
        target = json.dumps({"http": {"url": f"http://127.0.0.1:{port}/rr"}})
        reply = json.loads(peers.run_peer(peer_python, PEER_SCRIPT, "request", target))
    assert bytes.fromhex(reply["payload"]) == b"PING"
    assert reply["metadata"].get("x-answer") == "42"
