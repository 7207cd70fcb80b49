"""The `zeromq` endpoint: both sides in-process on free loopback ports (no broker)."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import zmq

from mq_bridge import Message, Publisher, Route
from mq_bridge.endpoints.base import Batch, InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.zeromq.codec import decode, encode_envelopes
from mq_bridge.errors import ClosedError, ConfigError, EndpointError, EndpointUnavailableError
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_network_memory import (
    GROWTH_LIMIT,
    growth_after_churn,
    linux_only,
)

Config = dict[str, Any]


def zeromq(port: int, **options: Any) -> Config:
    return {"zeromq": {"url": f"tcp://127.0.0.1:{port}", **options}}


@pytest.fixture
def opened() -> Iterator[Any]:
    """Builds and connects endpoints; closes them at teardown."""
    made: list[InputEndpoint | OutputEndpoint] = []

    def open_(config: Config, side: str = "input", source_metadata: bool = False) -> Any:
        context = new_context("test")
        context.source_metadata = source_metadata
        endpoint = (
            build_input(config, context) if side == "input" else build_output(config, context)
        )
        endpoint.connect()
        made.append(endpoint)
        return endpoint

    yield open_
    for endpoint in reversed(made):
        endpoint.close()


def receive_n(source: InputEndpoint, count: int, timeout: float = 10.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        batch = source.receive(count - len(got), 0.5)
        got += batch.messages
        source.ack(batch)
    return got


def test_push_pull_keeps_order_payload_metadata_and_id(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    sink = opened(zeromq(port), "output")
    sent = [Message(f"m{i}".encode(), {"k": str(i)}) for i in range(20)]
    sink.send(sent[:10])
    for message in sent[10:]:
        sink.send_one(message)
    got = receive_n(source, 20)
    assert [(m.payload, m.metadata, m.id) for m in got] == [
        (m.payload, m.metadata, m.id) for m in sent
    ]


def test_binary_payloads_travel_byte_exact(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    sink = opened(zeromq(port), "output")
    payloads = [bytes(range(256)), b"", "ünïcode".encode(), b"\xff\xfe"]
    sink.send([Message(p) for p in payloads])
    assert [m.payload for m in receive_n(source, 4)] == payloads


@pytest.mark.parametrize("fmt", ["raw", "raw_framed"])
def test_one_message_per_frame_formats(opened: Any, fmt: str) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True, format=fmt))
    sink = opened(zeromq(port, format=fmt), "output")
    sink.send([Message(b"a", {"k": "v"}), Message(b"b")])
    got = receive_n(source, 2)
    assert [m.payload for m in got] == [b"a", b"b"]
    assert got[0].metadata == ({"k": "v"} if fmt == "raw_framed" else {})


def test_a_nacked_batch_is_handed_out_again_in_order(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    sink = opened(zeromq(port), "output")
    sink.send([Message(f"m{i}".encode()) for i in range(5)])
    first = source.receive(2, 5)
    assert [m.payload for m in first.messages] == [b"m0", b"m1"]
    source.nack(first)
    again = receive_n(source, 5)
    assert [m.payload for m in again] == [b"m0", b"m1", b"m2", b"m3", b"m4"]


def test_receive_never_returns_more_than_asked_and_times_out_empty(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    assert not source.receive(10, 0.2)
    sink = opened(zeromq(port), "output")
    sink.send([Message(b"x")] * 7)  # one frame, seven messages
    batch = source.receive(3, 5)
    assert len(batch) == 3
    source.ack(batch)
    assert len(receive_n(source, 4)) == 4


def test_interrupt_ends_a_blocked_receive(opened: Any) -> None:
    source = opened(zeromq(free_port(), bind=True))
    threading.Timer(0.2, source.interrupt).start()
    assert not source.receive(10, None)  # returns (no timeout given) once interrupted


def test_an_input_closed_then_connected_again_reads_on(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    sink = opened(zeromq(port), "output")
    sink.send([Message(b"before")])
    assert [m.payload for m in receive_n(source, 1)] == [b"before"]
    source.close()
    source.connect()
    # What is sent before the sender notices the new connection goes to the old one and
    # is lost (ZeroMQ has no acknowledgements): send until one arrives.
    got: list[Message] = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        sink.send([Message(b"after")])
        got = source.receive(1, 0.2).messages
    assert [m.payload for m in got] == [b"after"]


def test_close_is_idempotent_and_use_after_close_raises(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    sink = opened(zeromq(port), "output")
    source.close()
    source.close()
    sink.close()
    sink.close()
    with pytest.raises(ClosedError):
        source.receive(1, 0.1)
    with pytest.raises(ClosedError):
        sink.send([Message(b"x")])


def test_pub_sub_filters_on_the_topic_prefix(opened: Any) -> None:
    port = free_port()
    orders = opened(zeromq(port, socket_type="sub", topic="orders"))
    everything = opened(zeromq(port, socket_type="sub"), source_metadata=True)
    eu = opened(zeromq(port, bind=True, socket_type="pub", topic="orders.eu"), "output")
    got: list[Message] = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:  # subscriptions propagate asynchronously
        eu.send([Message(b"hello", {"k": "v"})])
        got = orders.receive(10, 0.2).messages
    assert got and got[0].payload == b"hello" and got[0].metadata == {"k": "v"}
    seen = receive_n(everything, 1)
    assert seen[0].metadata["mqb.src.zeromq_topic"] == "orders.eu"


def test_a_subscriber_does_not_receive_other_topics(opened: Any) -> None:
    port = free_port()
    orders = opened(zeromq(port, socket_type="sub", topic="orders"))
    audit = opened(zeromq(port, bind=True, socket_type="pub", topic="audit"), "output")
    probe = opened(zeromq(port, socket_type="sub", topic="audit"))
    deadline = time.monotonic() + 10
    while not probe.receive(1, 0.1) and time.monotonic() < deadline:
        audit.send([Message(b"x")])
    assert not orders.receive(10, 0.3)


def test_req_rep_request_returns_the_reply_of_a_response_route() -> None:
    port = free_port()
    route = Route.from_config(
        {"input": zeromq(port, bind=True, socket_type="rep"), "output": {"response": {}}}
    ).with_handler(lambda message: message.with_payload(message.payload.upper()))
    with route:
        requester = build_output(zeromq(port, socket_type="req"), new_context("test"))
        requester.connect()
        try:
            request = Message(b"hello", {"k": "v"})
            reply = requester.request(request, 10)
            assert reply.payload == b"HELLO"
            assert reply.metadata["k"] == "v"
            assert reply.id == request.id
            requester.send([Message(b"a"), Message(b"b")])  # returns once answered
        finally:
            requester.close()


def test_a_rep_input_answers_with_an_empty_array_when_nothing_replies(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True, socket_type="rep"))
    requester = opened(zeromq(port, socket_type="req"), "output")
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            batch = source.receive(10, 0.2)
            source.ack(batch)

    server = threading.Thread(target=serve)
    server.start()
    try:
        requester.send([Message(b"x")])  # acked without a reply: confirmed all the same
        with pytest.raises(EndpointError, match="without a reply"):
            requester.request(Message(b"y"), 10)
    finally:
        done.set()
        server.join()


def test_a_request_without_a_responder_times_out_and_the_socket_stays_usable(
    opened: Any,
) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True, socket_type="rep"))
    requester = opened(zeromq(port, socket_type="req", request_timeout_ms=300), "output")
    with pytest.raises(TimeoutError):
        requester.request(Message(b"nobody answers"), 0.3)
    stale = source.receive(10, 5)  # the first request, now late: its answer is dropped
    source.ack(stale)
    answered = threading.Thread(target=lambda: source.ack(source.receive(10, 5)))
    answered.start()
    requester.send([Message(b"second")])
    answered.join()


def test_a_push_with_no_peer_fails_retriably_within_the_timeout(opened: Any) -> None:
    sink = opened(zeromq(free_port(), request_timeout_ms=200), "output")
    with pytest.raises(EndpointUnavailableError, match="no peer took the message"):
        sink.send([Message(b"x")])


def test_malformed_envelopes_are_delivered_raw_with_a_warning(
    opened: Any, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    raw = zmq.Context.instance().socket(zmq.PUSH)
    raw.connect(f"tcp://127.0.0.1:{port}")
    try:
        bad = [
            b"plain text",
            b'{"not": "an envelope"}',
            b'[{"payload": [1, 2, 300]}]',
            b'[{"payload": "x", "message_id": "not-an-id"}]',
            b'[{"payload": ',
        ]
        for frame in bad:
            raw.send(frame)
        with caplog.at_level(logging.WARNING, "mq_bridge.endpoints.zeromq"):
            got = receive_n(source, len(bad))
        assert [m.payload for m in got] == bad
        assert sum("not a valid mq-bridge envelope" in r.getMessage() for r in caplog.records) == 2
    finally:
        raw.close(linger=0)
    # The input still works.
    sink = opened(zeromq(port), "output")
    sink.send([Message(b"fine")])
    assert [m.payload for m in receive_n(source, 1)] == [b"fine"]


def test_an_oversized_message_disconnects_its_sender_only(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True, max_message_size=1024))
    big = zmq.Context.instance().socket(zmq.PUSH)
    big.connect(f"tcp://127.0.0.1:{port}")
    try:
        big.send(b"x" * 10_000)
        assert not source.receive(10, 0.5)  # dropped, and the sender disconnected
    finally:
        big.close(linger=0)
    sink = opened(zeromq(port), "output")
    sink.send([Message(b"small")])
    assert [m.payload for m in receive_n(source, 1)] == [b"small"]


def test_config_errors_name_the_option() -> None:
    with pytest.raises(ConfigError, match="url"):
        build_input({"zeromq": {"url": "http://x:1"}}, new_context("t"))
    with pytest.raises(ConfigError, match="socket_type"):
        build_input(
            {"zeromq": {"url": "tcp://127.0.0.1:1", "socket_type": "push"}}, new_context("t")
        )
    with pytest.raises(ConfigError, match="socket_type"):
        build_output(
            {"zeromq": {"url": "tcp://127.0.0.1:1", "socket_type": "rep"}}, new_context("t")
        )
    with pytest.raises(ConfigError, match="format"):
        build_output({"zeromq": {"url": "tcp://127.0.0.1:1", "format": "xml"}}, new_context("t"))


def test_a_bind_to_a_busy_port_fails_connect(opened: Any) -> None:
    port = free_port()
    opened(zeromq(port, bind=True))
    second = build_input(zeromq(port, bind=True), new_context("t"))
    with pytest.raises(EndpointUnavailableError, match="cannot bind"):
        second.connect()


def test_the_publisher_api_and_status(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    with Publisher.from_config(zeromq(port)) as publisher:
        publisher.send_json({"a": 1}, {"kind": "k"})
    got = receive_n(source, 1)
    assert got[0].json() == {"a": 1} and got[0].metadata == {"kind": "k"}
    status = source.status().as_dict()
    assert status["healthy"] is True and status["target"].startswith("zeromq+pull:bind:")


def test_codec_round_trip_and_mq_bridge_py_envelopes() -> None:
    message = Message(b"\x00\xff", {"k": "v", "mqb.src.zeromq_topic": "t"})
    decoded = decode([encode_envelopes([message])], "json")
    assert decoded.problem is None
    assert [(m.payload, m.metadata, m.id) for m in decoded.messages] == [
        (b"\x00\xff", {"k": "v"}, message.id)
    ]
    # mq-bridge-py 0.3.2's form: bytes as a list, a dashed UUID; metadata left out.
    frame = b'[{"message_id":"01a232b2-4e7b-722a-97b2-17be9a9c6262","payload":[104,105]}]'
    (read,) = decode([b"topic", frame], "json").messages
    assert (read.payload, read.metadata, read.id) == (
        b"hi",
        {},
        "01a232b2-4e7b-722a-97b2-17be9a9c6262",
    )


def test_unacked_batches_do_not_block_later_receives(opened: Any) -> None:
    port = free_port()
    source = opened(zeromq(port, bind=True))
    sink = opened(zeromq(port), "output")
    sink.send([Message(b"a"), Message(b"b")])
    first: Batch = source.receive(1, 5)
    second: Batch = source.receive(1, 5)
    source.ack(second)
    source.ack(first)
    assert [m.payload for m in first.messages + second.messages] == [b"a", b"b"]


# -- 10,000 connections opened and dropped -----------------------------------------------
# The servers (grpc's and this input's) run in this process, so its resident set
# (/proc/self/statm) holds everything they keep per connection. A warm-up churn first lets
# the allocators reach their working size; the 10,000 connections after it may grow the
# process by `GROWTH_LIMIT` at most (generous: a leak check, not a measurement; a
# server that kept ~3 KiB per connection fails it). The limits and `growth_after_churn` are
# test_network_memory.py's; test_grpc.py uses `threaded_churn` too.


def threaded_churn(
    port: int, count: int, talk: Callable[[int, socket.socket], None], threads: int
) -> None:
    """Open `count` connections to `port`, `threads` at a time; connection ``i`` runs
    ``talk(i, sock)``, then the client drops it."""

    def run(first: int) -> None:
        for index in range(first, count, threads):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                talk(index, sock)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, range(threads)))


def zmtp_push_greeting() -> bytes:
    """A ZMTP 3.0 PUSH peer's opening: the greeting (NULL mechanism) and its READY."""
    greeting = b"\xff" + bytes(8) + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\0") + bytes(32)
    ready = b"\x05READY\x0bSocket-Type" + struct.pack(">I", 4) + b"PUSH"
    return greeting + bytes([0x04, len(ready)]) + ready


def zmtp_churn_talk(index: int, sock: socket.socket) -> None:
    """Thirds: leave at once; send half a greeting and leave; speak ZMTP as a PUSH peer,
    send one message (``churn <index>``) and leave."""
    kind = index % 3
    if kind == 1:
        sock.sendall(b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f")
    elif kind == 2:
        sock.sendall(zmtp_push_greeting())
        seen = b""
        while len(seen) < 64:  # the input's greeting: it took ours
            chunk = sock.recv(4096)
            assert chunk, "the input closed a well-behaved peer"
            seen += chunk
        frame = encode_envelopes([Message(b"churn %d" % index)])
        sock.sendall(bytes([0x00, len(frame)]) + frame)


class Drain:
    """Receives and acks from `source` on a thread (as a route does), keeping the payloads."""

    def __init__(self, source: InputEndpoint) -> None:
        self.source = source
        self.payloads: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = self.source.receive(1000, 0.1)
            self.payloads += [message.payload for message in batch.messages]
            self.source.ack(batch)

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.payloads) < count and time.monotonic() < deadline:
            time.sleep(0.05)

    def __enter__(self) -> Drain:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


@linux_only
def test_10000_connections_opened_and_dropped_leave_the_input_healthy(opened: Any) -> None:
    """10,000 TCP connections that never speak ZMTP, hang up mid-greeting, or push one
    message and go: libzmq closes or serves each, every pushed message arrives, memory
    returns to its baseline, and the input keeps serving real peers.

    The input is read throughout, as a route reads it: libzmq frees a dropped peer's
    session only when the socket's owner next uses the socket (an input nobody reads
    keeps ~11 KiB per dropped peer until it is read again)."""
    port = free_port()
    source = opened(zeromq(port, bind=True))
    pushed = 0
    with Drain(source) as drain:

        def churn_once(count: int) -> None:
            nonlocal pushed
            # 4 at a time: each connection waits for libzmq's accept (~1-3 ms here)
            threaded_churn(port, count, zmtp_churn_talk, threads=4)
            pushed += len(range(2, count, 3))
            drain.wait_for(pushed)

        growth = growth_after_churn(churn_once)
        assert len(drain.payloads) == pushed
        assert growth < GROWTH_LIMIT, f"grew {growth / 2**20:.1f} MiB"
        sink = opened(zeromq(port), "output")
        sink.send([Message(b"still here")])
        drain.wait_for(pushed + 1)
    assert drain.payloads[-1] == b"still here"
