"""Interop with mq-bridge 1.2.0 over its gRPC service ``mqbridge.Bridge``, both ways.

The peer runs in its own venv (`tests/peers.py`) as a subprocess on a free loopback port.
Checked: payload, id and metadata of published messages (``Publish`` and
``PublishBatch``), request/reply answers, and ``Subscribe`` + ``Acknowledge`` between our
client and the peer's server and the reverse.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

import pytest

from mq_bridge import Message, Route
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_grpc import Acker, client, server
from tests.mq_bridge.endpoints.test_zeromq_interop import finish, go, peer  # noqa: F401

PEER_SCRIPT = r"""
import json, sys, time
from mq_bridge import Consumer, Message, Publisher, Route
mode, config = sys.argv[1], json.loads(sys.argv[2])
if mode == "publish":
    publisher = Publisher.from_config(config)
    print("ready", flush=True)
    sys.stdin.readline()
    for item in json.loads(sys.argv[3]):
        publisher.send(Message(item["payload"].encode(), item["metadata"], id=item["id"]))
    reply = publisher.request(Message(b"ping", {"k": "v"}, id=sys.argv[4]))
    print(json.dumps({"id": reply.id, "payload": reply.payload.decode(),
                      "metadata": reply.metadata}), flush=True)
elif mode == "respond":
    got = []
    def handle(m):
        got.append({"id": m.id, "payload": m.payload.decode(), "metadata": m.metadata})
        return m.with_payload(m.payload.upper())
    route = Route.from_config({"input": config, "output": {"response": {}}}).with_handler(handle)
    route.start()
    print("ready", flush=True)
    sys.stdin.readline()
    route.stop()
    print(json.dumps(got), flush=True)
elif mode == "subscribe":
    got = []
    with Consumer.from_config(config) as consumer:
        print("ready", flush=True)
        deadline = time.monotonic() + 20
        while len(got) < int(sys.argv[3]) and time.monotonic() < deadline:
            for m in consumer.poll(max=10, timeout_ms=500):
                got.append({"id": m.id, "payload": m.payload.decode(), "metadata": m.metadata})
            consumer.commit()
    print(json.dumps(got), flush=True)
"""

SENT = [
    {"id": "01a232b2-4e7b-722a-97b2-17be9a9c6262", "payload": '{"a":1}', "metadata": {"k": "v"}},
    {"id": "01a232b2-4e7b-722a-97b2-17be9a9c6263", "payload": "two", "metadata": {}},
]


@pytest.fixture
def grpc_peer(peer: Any) -> Any:  # noqa: F811 - the imported fixture
    return functools.partial(peer, script=PEER_SCRIPT)


def test_peer_publishes_and_requests_to_our_server(grpc_peer: Any) -> None:
    port = free_port()
    seen: list[Message] = []

    def handle(message: Message) -> Message:
        seen.append(message)
        return message.with_payload(message.payload.upper()).with_metadata(answered="yes")

    route = Route.from_config({"input": server(port, topic="t1"), "output": {"response": {}}})
    request_id = "01a232b2-4e7b-722a-97b2-17be9a9c6264"
    with route.with_handler(handle):
        config = {"grpc": {"url": f"http://127.0.0.1:{port}", "topic": "t1"}}
        process = grpc_peer(
            "mq-bridge", "publish", json.dumps(config), json.dumps(SENT), request_id
        )
        go(process)
        reply = json.loads(finish(process).strip().splitlines()[-1])
    assert [(m.id, m.payload.decode()) for m in seen[:2]] == [(m["id"], m["payload"]) for m in SENT]
    for message, sent in zip(seen, SENT, strict=False):
        assert {**sent["metadata"], "mq_bridge.topic": "t1"}.items() <= message.metadata.items()
    assert reply["payload"] == "PING" and reply["id"] == request_id
    assert reply["metadata"]["k"] == "v" and reply["metadata"]["answered"] == "yes"


def test_we_publish_and_request_to_the_peer_server(grpc_peer: Any) -> None:
    port = free_port()
    config = {"grpc": {"url": f"127.0.0.1:{port}", "server_mode": True, "topic": "t1"}}
    process = grpc_peer("mq-bridge", "respond", json.dumps(config))
    sink = build_output(client(port, topic="t1"), new_context("interop"))
    sink.connect()
    try:
        request = Message(b"hello", {"k": "v"})
        reply = sink.request(request, 10)
        sink.send([Message(m["payload"].encode(), m["metadata"], id=m["id"]) for m in SENT])
        sink.send_one(Message(b"single", {"x": "y"}, id=SENT[0]["id"].replace("62", "99")))
    finally:
        sink.close()
        go(process)
    got = json.loads(finish(process).strip().splitlines()[-1])
    assert reply.payload == b"HELLO" and reply.metadata["k"] == "v" and reply.id == request.id
    assert [(m["id"], m["payload"]) for m in got[1:3]] == [(m["id"], m["payload"]) for m in SENT]
    for message, sent in zip(got[1:3], SENT, strict=True):
        assert message["metadata"] == {**sent["metadata"], "mq_bridge.topic": "t1"}
    assert got[3]["payload"] == "single" and got[3]["metadata"]["x"] == "y"


def test_the_peer_subscribes_to_our_server(grpc_peer: Any) -> None:
    port = free_port()
    source = build_input(server(port, topic="t1"), new_context("interop"))
    source.connect()
    sink = build_output(client(port, topic="t1"), new_context("interop"))
    sink.connect()
    try:
        config = {"grpc": {"url": f"http://127.0.0.1:{port}", "topic": "t1", "consumer_id": "p"}}
        process = grpc_peer("mq-bridge", "subscribe", json.dumps(config), "2")
        with Acker(source):
            sink.send([Message(m["payload"].encode(), m["metadata"], id=m["id"]) for m in SENT])
            got = json.loads(finish(process).strip().splitlines()[-1])
    finally:
        sink.close()
        source.close()
    assert [(m["id"], m["payload"]) for m in got] == [(m["id"], m["payload"]) for m in SENT]
    assert got[0]["metadata"]["k"] == "v"


def test_we_subscribe_to_the_peer_server(grpc_peer: Any) -> None:
    port = free_port()
    config = {"grpc": {"url": f"127.0.0.1:{port}", "server_mode": True, "topic": "t1"}}
    process = grpc_peer("mq-bridge", "respond", json.dumps(config))
    subscriber = build_input(client(port, topic="t1", consumer_id="ours"), new_context("interop"))
    subscriber.connect()
    sink = build_output(client(port, topic="t1"), new_context("interop"))
    sink.connect()
    got: list[Message] = []
    try:
        sender = threading.Thread(
            target=sink.send,
            args=([Message(m["payload"].encode(), m["metadata"], id=m["id"]) for m in SENT],),
        )
        sender.start()
        while len(got) < len(SENT):
            batch = subscriber.receive(10, 10)
            assert batch, "nothing arrived from the peer's Subscribe stream"
            got += batch.messages
            subscriber.ack(batch)
        sender.join()
    finally:
        subscriber.close()
        sink.close()
        go(process)
        finish(process)
    assert [(m.id, m.payload.decode()) for m in got] == [(m["id"], m["payload"]) for m in SENT]
    assert got[0].metadata["k"] == "v"
