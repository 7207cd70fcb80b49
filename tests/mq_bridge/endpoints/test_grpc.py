"""The `grpc` endpoint: the embedded Bridge server and its clients, in-process on free
loopback ports."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from mq_bridge import Message, Publisher, Route
from mq_bridge.endpoints.base import InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.grpc import batch_call
from mq_bridge.endpoints.grpc.proto import messages, method_path
from mq_bridge.endpoints.kit.connections import ConnectionRegistry
from mq_bridge.errors import (
    ClosedError,
    ConfigError,
    EndpointError,
    EndpointUnavailableError,
    RequestTimeoutError,
    SendError,
    is_retriable,
)
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_network_memory import (
    CONNECTIONS,
    GROWTH_LIMIT,
    WARM_UP,
    growth_after_churn,
    linux_only,
)
from tests.mq_bridge.endpoints.test_zeromq import threaded_churn
from tests.mq_bridge.kit.test_tls import Pki, pki  # noqa: F401 - the fixture

Config = dict[str, Any]


def server(port: int, **options: Any) -> Config:
    return {"grpc": {"url": f"127.0.0.1:{port}", "server_mode": True, **options}}


def client(port: int, **options: Any) -> Config:
    return {"grpc": {"url": f"http://127.0.0.1:{port}", "connect_timeout_ms": 3000, **options}}


@pytest.fixture
def opened() -> Iterator[Any]:
    made: list[InputEndpoint | OutputEndpoint] = []

    def open_(config: Config, side: str = "input") -> Any:
        context = new_context("test")
        endpoint = (
            build_input(config, context) if side == "input" else build_output(config, context)
        )
        endpoint.connect()
        made.append(endpoint)
        return endpoint

    yield open_
    for endpoint in reversed(made):
        endpoint.close()


class Acker:
    """Receives from `source` on a thread, settling each batch with `settle`."""

    def __init__(self, source: InputEndpoint, settle: str = "ack") -> None:
        self.source = source
        self.settle = settle
        self.got: list[Message] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = self.source.receive(100, 0.1)
            self.got += batch.messages
            if batch:
                getattr(self.source, self.settle)(batch)

    def __enter__(self) -> Acker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def test_publish_and_publish_batch_keep_order_payload_metadata_and_id(opened: Any) -> None:
    port = free_port()
    source = opened(server(port))
    sink = opened(client(port), "output")
    sent = [Message(f"m{i}".encode(), {"k": str(i)}) for i in range(10)]
    with Acker(source) as acker:
        sink.send(sent[:6])  # one PublishBatch stream
        for message in sent[6:]:
            sink.send_one(message)  # unary Publish
    assert [(m.payload, m.id) for m in acker.got] == [(m.payload, m.id) for m in sent]
    for got, message in zip(acker.got, sent, strict=True):
        assert got.metadata["k"] == message.metadata["k"]
        assert got.metadata["mq_bridge.topic"] == "default"


def test_a_nack_fails_the_send_retriably(opened: Any) -> None:
    port = free_port()
    source = opened(server(port))
    sink = opened(client(port), "output")
    with Acker(source, "nack"):
        with pytest.raises(EndpointError, match="NACK") as failed:
            sink.send_one(Message(b"x"))
        assert is_retriable(failed.value)
        with pytest.raises(SendError) as batch:
            sink.send([Message(b"a"), Message(b"b")])
        assert sorted(batch.value.failures) == [0, 1] and batch.value.retriable


@pytest.fixture(params=["single-threaded", "public"])
def batch_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test over both ways a batch is streamed: `batch_call` (grpcio's internal
    single-threaded call) and grpcio's public stream call (its fallback)."""
    if request.param == "public":
        monkeypatch.setattr(batch_call, "supported", lambda channel: False)
    return str(request.param)


def test_a_batch_call_that_fails_fails_the_batch(opened: Any, batch_path: str) -> None:
    port = free_port()
    source = opened(server(port, max_decoding_message_size=1024))
    hasty = opened(client(port, request_timeout_ms=300), "output")
    sink = opened(client(port), "output")
    assert sink._single_threaded == (batch_path == "single-threaded")
    with pytest.raises(RequestTimeoutError, match="DEADLINE_EXCEEDED"):
        hasty.send([Message(b"nobody"), Message(b"settles")])  # nothing receives yet
    with Acker(source) as acker:
        with pytest.raises(EndpointError, match="RESOURCE_EXHAUSTED") as refused:
            sink.send([Message(b"x" * 10_000), Message(b"y" * 10_000)])
        assert not is_retriable(refused.value)
        sink.send([Message(b"a"), Message(b"b")])
    assert [m.payload for m in acker.got] == [b"nobody", b"settles", b"a", b"b"]
    source.close()  # the server stops
    with pytest.raises(EndpointUnavailableError, match="UNAVAILABLE") as gone:
        sink.send([Message(b"c"), Message(b"d")])
    assert is_retriable(gone.value)


def test_a_changed_private_batch_call_falls_back_to_grpcio_public_call(
    opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`batch_call` uses grpcio internals: if a grpcio release changes their shape, the
    output keeps working on the public stream call instead of failing every batch."""
    port = free_port()
    source = opened(server(port))
    sink = opened(client(port), "output")
    assert sink._single_threaded

    def changed(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("segregated_call() takes 8 positional arguments but 9 were given")

    monkeypatch.setattr(batch_call, "publish_batch", changed)
    with Acker(source) as acker:
        sink.send([Message(b"a"), Message(b"b")])
        sink.send([Message(b"c"), Message(b"d")])
    assert not sink._single_threaded
    assert [m.payload for m in acker.got] == [b"a", b"b", b"c", b"d"]


def test_request_returns_the_reply_of_a_response_route() -> None:
    port = free_port()
    route = Route.from_config({"input": server(port), "output": {"response": {}}})
    route = route.with_handler(lambda m: m.with_payload(m.payload.upper()))
    with route, Publisher.from_config(client(port)) as publisher:
        reply = publisher.request(Message(b"hello", {"k": "v"}))
        assert reply.payload == b"HELLO" and reply.metadata["k"] == "v"
        publisher.send(b"plain")  # acknowledged by the route's response output


def test_request_without_a_reply_says_so(opened: Any) -> None:
    port = free_port()
    source = opened(server(port))
    sink = opened(client(port), "output")
    with Acker(source), pytest.raises(EndpointError, match="without a reply"):
        sink.request(Message(b"x"), 10)


def test_inputs_share_an_address_by_topic_and_unknown_topics_are_nacked(opened: Any) -> None:
    port = free_port()
    orders = opened(server(port, topic="orders"))
    audit = opened(server(port, topic="audit"))
    with pytest.raises(ConfigError, match="already serves topic"):
        opened(server(port, topic="orders"))
    with Acker(orders) as got_orders, Acker(audit) as got_audit:
        opened(client(port, topic="orders"), "output").send_one(Message(b"o"))
        opened(client(port, topic="audit"), "output").send_one(Message(b"a"))
        with pytest.raises(EndpointError, match="No route for topic 'other'"):
            opened(client(port, topic="other"), "output").send_one(Message(b"x"))
    assert [m.payload for m in got_orders.got] == [b"o"]
    assert [m.payload for m in got_audit.got] == [b"a"]


def test_an_unsettled_message_is_nacked_after_timeout_ms(opened: Any) -> None:
    port = free_port()
    source = opened(server(port, timeout_ms=200))
    sink = opened(client(port), "output")
    with pytest.raises(EndpointError, match="Timed out waiting for the route"):
        sink.send_one(Message(b"never settled"))
    assert len(source.receive(10, 1)) == 1  # it was handed out; the publisher was told NACK


def test_an_oversized_message_is_refused_and_the_server_stays_healthy(opened: Any) -> None:
    port = free_port()
    source = opened(server(port, max_decoding_message_size=1024))
    sink = opened(client(port), "output")
    with Acker(source) as acker:
        with pytest.raises(EndpointError, match="RESOURCE_EXHAUSTED") as refused:
            sink.send_one(Message(b"x" * 10_000))
        assert not is_retriable(refused.value)
        sink.send_one(Message(b"small"))
    assert [m.payload for m in acker.got] == [b"small"]


def test_malformed_protobuf_is_an_error_answer_and_the_server_stays_healthy(opened: Any) -> None:
    port = free_port()
    source = opened(server(port))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        raw = channel.unary_unary(method_path("Publish"))  # bytes in, bytes out
        with pytest.raises(grpc.RpcError) as failed:
            raw(b"\xff\xff\xff\xff not protobuf", timeout=5)
        assert failed.value.code() == grpc.StatusCode.INTERNAL
    sink = opened(client(port), "output")
    with Acker(source) as acker:
        sink.send_one(Message(b"fine"))
    assert [m.payload for m in acker.got] == [b"fine"]


def test_no_server_fails_connect_quickly() -> None:
    sink = build_output(client(free_port(), connect_timeout_ms=300), new_context("t"))
    with pytest.raises(EndpointUnavailableError, match="no server reachable"):
        sink.connect()


def test_a_busy_address_fails_the_server_connect() -> None:
    with socket_listening() as port:
        source = build_input(server(port), new_context("t"))
        with pytest.raises(EndpointUnavailableError, match="cannot listen"):
            source.connect()


def test_a_second_server_on_the_same_port_fails_instead_of_sharing_it(opened: Any) -> None:
    """grpcio's default SO_REUSEPORT would let two servers split one port's connections."""
    port = free_port()
    opened(server(port, topic="first"))
    context = new_context("t")
    context.connections = ConnectionRegistry()  # as in another process: no shared server
    other = build_input(server(port, topic="second"), context)
    with pytest.raises(EndpointUnavailableError, match="cannot listen"):
        other.connect()


@contextlib.contextmanager
def socket_listening() -> Iterator[int]:
    """A port some other listener holds."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_close_reconnect_interrupt_and_use_after_close(opened: Any) -> None:
    port = free_port()
    source = opened(server(port))
    sink = opened(client(port), "output")
    threading.Timer(0.2, source.interrupt).start()
    assert not source.receive(10, None)
    source.close()
    source.close()
    with pytest.raises(ClosedError):
        source.receive(1, 0.1)
    source.connect()  # the runtime's reconnect: close() then connect()
    with Acker(source) as acker:
        sink.send_one(Message(b"after"))
    assert [m.payload for m in acker.got] == [b"after"]
    sink.close()
    with pytest.raises(ClosedError):
        sink.send_one(Message(b"x"))


def test_a_subscriber_gets_published_messages_and_unacked_ones_again(opened: Any) -> None:
    port = free_port()
    source = opened(server(port, topic="t"))
    sink = opened(client(port, topic="t"), "output")
    subscriber_config = client(port, topic="t", consumer_id="stable")
    subscriber = opened(subscriber_config)
    with Acker(source):
        sink.send([Message(b"a"), Message(b"b")])
    first = subscriber.receive(10, 5)
    while len(first) < 2:
        more = subscriber.receive(10, 5)
        first.messages.extend(more.messages)
        first.token.extend(more.token)
    assert [m.payload for m in first.messages] == [b"a", b"b"]
    subscriber.close()  # nothing acked: the server keeps both for "stable"
    again = opened(subscriber_config)
    batch = again.receive(10, 5)
    assert [m.payload for m in batch.messages] == [b"a", b"b"][: len(batch)]
    again.ack(batch)


def test_tls_and_mutual_tls(opened: Any, pki: Pki) -> None:  # noqa: F811
    port = free_port()
    tls_server = {"cert_file": str(pki.server_cert), "key_file": str(pki.server_key)}
    source = opened(server(port, tls={"required": True, **tls_server}))
    sink = opened(
        {"grpc": {"url": f"https://localhost:{port}", "tls": {"ca_file": str(pki.ca)}}}, "output"
    )
    with Acker(source) as acker:
        sink.send_one(Message(b"secret"))
    assert [m.payload for m in acker.got] == [b"secret"]

    port = free_port()
    mutual = {"required": True, **tls_server, "ca_file": str(pki.ca)}
    source = opened(server(port, tls=mutual))
    client_tls = {
        "required": True,
        "ca_file": str(pki.ca),
        "cert_file": str(pki.client_cert),
        "key_file": str(pki.client_key),
    }
    sink = opened({"grpc": {"url": f"localhost:{port}", "tls": client_tls}}, "output")
    with Acker(source) as acker:
        sink.send_one(Message(b"mutual"))
    assert [m.payload for m in acker.got] == [b"mutual"]
    anonymous = build_output(
        {"grpc": {"url": f"localhost:{port}", "connect_timeout_ms": 500,
                  "tls": {"required": True, "ca_file": str(pki.ca)}}},
        new_context("t"),
    )  # fmt: skip
    with pytest.raises(EndpointUnavailableError):
        anonymous.connect()
        anonymous.send_one(Message(b"refused"))


def test_config_errors_name_the_option() -> None:
    with pytest.raises(ConfigError, match="url"):
        build_output({"grpc": {"url": "nowhere"}}, new_context("t"))
    with pytest.raises(ConfigError, match="method_name"):
        build_output({"grpc": {"url": "localhost:1", "method_name": "Get"}}, new_context("t"))
    with pytest.raises(ConfigError, match="tls"):
        build_input(
            {"grpc": {"url": "0.0.0.0:1", "server_mode": True, "tls": {"required": True}}},
            new_context("t"),
        )


def test_the_wire_bytes_are_mq_bridge_bridge_messages() -> None:
    """Field numbers and types of mqbridge/bridge.proto, byte for byte."""
    proto = messages()
    bridge = proto.BridgeMessage(payload=b"x", id="abc", metadata={"k": "v"})
    assert bridge.SerializeToString() == b"\n\x01x\x12\x03abc\x1a\x06\n\x01k\x12\x01v"
    nack = proto.PublishResponse(ack=proto.Ack(id="a", status=1, reason="r"))
    assert nack.SerializeToString() == b"Z\x08\n\x01a\x10\x01\x1a\x01r"
    reply = proto.PublishResponse(reply=proto.BridgeMessage(id="i"))
    assert reply.SerializeToString() == b"R\x03\x12\x01i"
    error = proto.PublishResponse(error="e")
    assert error.SerializeToString() == b"b\x01e"
    subscribe = proto.SubscribeRequest(topic="t", consumer_id="c")
    assert subscribe.SerializeToString() == b"\n\x01t\x12\x01c"
    answer = proto.AckResponse(success=True, error="e")
    assert answer.SerializeToString() == b"\x08\x01\x12\x01e"


def test_status_has_the_documented_shape(opened: Any) -> None:
    port = free_port()
    source = opened(server(port))
    status = source.status().as_dict()
    assert status["healthy"] is True and status["details"]["port"] == port
    assert set(status) == {"healthy", "target", "pending", "capacity", "error", "details"}
    time.sleep(0)  # (nothing to wait for: the server answers at once)


def http2_frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    header = len(payload).to_bytes(3, "big") + bytes([kind, flags]) + struct.pack(">I", stream)
    return header + payload


def hpack_literal(name: bytes, value: bytes) -> bytes:
    """A header as an HPACK literal without indexing (no Huffman; short strings only)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def raw_publish(bridge: bytes) -> bytes:
    """A whole HTTP/2 connection opening that calls ``Publish`` with `bridge` on stream 1."""
    headers = (
        b"\x83\x86"  # :method POST, :scheme http (static table)
        + hpack_literal(b":path", method_path("Publish").encode())
        + hpack_literal(b":authority", b"localhost")
        + hpack_literal(b"content-type", b"application/grpc")
        + hpack_literal(b"te", b"trailers")
    )
    data = b"\x00" + struct.pack(">I", len(bridge)) + bridge
    return (
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + http2_frame(4, 0, 0)  # SETTINGS
        + http2_frame(1, 0x4, 1, headers)  # HEADERS, END_HEADERS
        + http2_frame(0, 0x1, 1, data)  # DATA, END_STREAM
    )


def raw_answer(sock: socket.socket) -> bytes:
    """The gRPC message the server answered on stream 1 (the frames up to END_STREAM)."""
    buffer, data = b"", b""
    while True:
        while len(buffer) < 9 or len(buffer) < 9 + int.from_bytes(buffer[:3], "big"):
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection without an answer"
            buffer += chunk
        length, kind, flags = int.from_bytes(buffer[:3], "big"), buffer[3], buffer[4]
        stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
        payload, buffer = buffer[9 : 9 + length], buffer[9 + length :]
        if kind == 4 and not flags & 0x1:
            sock.sendall(http2_frame(4, 0x1, 0))  # SETTINGS ACK
        if stream == 1 and kind == 0:
            data += payload
        if stream == 1 and kind in (0, 1) and flags & 0x1:
            return data[5:]


@linux_only
def test_10000_connections_opened_and_dropped_leave_the_server_healthy(opened: Any) -> None:
    """10,000 TCP connections: a third close at once, a third send HTTP/1 instead of HTTP/2
    (the server closes them), a third call ``Publish`` over raw HTTP/2 for a topic nobody
    serves and read the NACK it gets. Memory returns to its baseline and the server still
    serves."""
    port = free_port()
    source = opened(server(port))
    proto = messages()
    unserved = proto.BridgeMessage(payload=b"x", metadata={"mq_bridge.topic": "nobody"})
    request = raw_publish(unserved.SerializeToString())
    answers: list[Any] = []

    def talk(index: int, sock: socket.socket) -> None:
        if index % 3 == 1:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        elif index % 3 == 2:
            sock.sendall(request)
            answers.append(proto.PublishResponse.FromString(raw_answer(sock)))

    # one at a time: grpc's event engine grows its thread pool (and malloc arenas) under
    # concurrent connections, which would blur the check; 10,000 take ~2 s anyway
    growth = growth_after_churn(lambda count: threaded_churn(port, count, talk, threads=1))
    assert len(answers) == len(range(2, WARM_UP, 3)) + len(range(2, CONNECTIONS, 3))
    assert {(a.ack.status, a.ack.reason) for a in answers} == {(1, "No route for topic 'nobody'")}
    assert growth < GROWTH_LIMIT, f"grew {growth / 2**20:.1f} MiB"
    sink = opened(client(port), "output")
    with Acker(source) as acker:
        sink.send_one(Message(b"still here"))
    assert [m.payload for m in acker.got] == [b"still here"]
