"""Interop with the peer, mq-bridge 1.2.0 (its own venv), over WebSocket on loopback.

A WebSocket frame carries only the payload (neither side puts an id or metadata on the
wire), so payloads are what must arrive intact, both ways: the peer's websocket output to
our input, our websocket output to the peer's input; then our `request` answered by a
peer route ending in `response`.
"""

from __future__ import annotations

import json

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from tests import peers
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_http_interop import PEER_SCRIPT, peer_process
from tests.mq_bridge.endpoints.test_websocket import ws_config

PAYLOADS = [b'{"order": 1}', "ünïcode text".encode(), b"plain"]


@pytest.fixture(scope="module")
def peer_python() -> str:
    return peers.peer_python("mq-bridge")


def test_the_peer_s_websocket_output_reaches_our_input(peer_python: str) -> None:
    port = free_port()
    topic = f"ws-interop-{port}"
    route = {"input": ws_config(port, path="/in"), "output": {"memory": {"topic": topic}}}
    target = json.dumps({"websocket": {"url": f"ws://127.0.0.1:{port}/in"}})
    wire = [{"payload": p.hex(), "metadata": {}, "id": None} for p in PAYLOADS]
    with Route.from_config(route), Consumer.from_config({"memory": {"topic": topic}}) as out:
        assert "sent" in peers.run_peer(
            peer_python, PEER_SCRIPT, "publish", target, json.dumps(wire)
        )
        got: list[Message] = []
        for _ in range(50):
            got += out.poll(max=10, timeout_ms=200)
            if len(got) >= len(PAYLOADS):
                break
    assert [m.payload for m in got] == PAYLOADS
    assert all(m.metadata["ws_path"] == "/in" for m in got)


def test_our_websocket_output_reaches_the_peer_s_input(peer_python: str) -> None:
    port = free_port()
    config = json.dumps(ws_config(port, path="/in"))
    with peer_process(peer_python, "collect", config) as process:
        with Publisher.from_config({"websocket": {"url": f"ws://127.0.0.1:{port}/in"}}) as pub:
            pub.send_batch([Message(p) for p in PAYLOADS])
        assert process.stdout is not None
        got = [json.loads(process.stdout.readline()) for _ in PAYLOADS]
    assert [bytes.fromhex(m["payload"]) for m in got] == PAYLOADS


def test_our_request_is_answered_by_a_peer_route(peer_python: str) -> None:
    port = free_port()
    target = {"websocket": {"url": f"ws://127.0.0.1:{port}/rr"}}
    config = json.dumps(ws_config(port, path="/rr"))
    with peer_process(peer_python, "respond", config), Publisher.from_config(target) as pub:
        request = Message(b"hello")
        reply = pub.request(request)
    assert reply.payload == b"HELLO"
    assert reply.id == request.id
