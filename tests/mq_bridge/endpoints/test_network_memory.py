"""Memory returns to its baseline after 10,000 connections opened and dropped.

The http and websocket inputs serve in this process, so the process's resident set
(``/proc/self/statm``) includes everything they keep per connection. A warm-up churn first
lets the allocators and aiohttp's caches reach their steady size; the 10,000 connections
after it may grow the process by a bounded amount only (`GROWTH_LIMIT`, generous: this is a
leak check, not a measurement; a leak of the connection's objects costs several times
that). Half of the connections are idle and half carry a partial request; every one gets a
status or is closed, and the input answers a normal request afterwards.

`churn` opens the connections in rounds of `ROUND` (sockets open at once), over raw loopback
sockets; test_http_bad_input.py uses it too.
"""

from __future__ import annotations

import gc
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from mq_bridge.endpoints.base import InputEndpoint
from mq_bridge.runtime.factory import build_input, new_context
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_http import call, http_config
from tests.mq_bridge.endpoints.test_websocket import client_exchange, ws_config

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the resident set from /proc/self/statm"
)
# ~20 s each (10,000 connections): a stress test, left out of the plain local run (CI runs it).
pytestmark = [linux_only, pytest.mark.slow]

CONNECTIONS = 10_000
WARM_UP = 2_000
ROUND = 250
GROWTH_LIMIT = 30 * 1024 * 1024

#: What a connection does once open: send its first bytes (b"": nothing), then (`None`)
#: leave at once, or wait for the server's first answer, returned (b"": the server closed).
Opening = Callable[[int], bytes]


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def churn(
    port: int,
    count: int,
    opening: Opening,
    then: Callable[[int, socket.socket], None] | None = None,
    wait: bool = True,
    timeout: float = 30.0,
) -> list[bytes | None]:
    """Open `count` connections to `port` in rounds of `ROUND`; connection ``i`` sends
    ``opening(i)``. With `wait`, each waits for the server's first bytes (b"" when the
    server closed it; None when nothing came within `timeout`), then `then(i, sock)` runs;
    then the client closes it. The first answers, in order (all None without `wait`)."""
    answers: list[bytes | None] = []
    for start in range(0, count, ROUND):
        sockets = []
        for index in range(start, min(start + ROUND, count)):
            sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
            data = opening(index)
            if data:
                sock.sendall(data)
            sockets.append(sock)
        try:
            firsts = _first_answers(sockets, timeout) if wait else [None] * len(sockets)
            if then is not None:
                for offset, sock in enumerate(sockets):
                    then(start + offset, sock)
        finally:
            for sock in sockets:
                sock.close()
        answers += firsts
    return answers


def _first_answers(sockets: list[socket.socket], timeout: float) -> list[bytes | None]:
    answers: dict[socket.socket, bytes] = {}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        while len(answers) < len(sockets) and time.monotonic() < deadline:
            for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    answers[sock] = sock.recv(65536)
                except ConnectionResetError:
                    answers[sock] = b""
                selector.unregister(sock)
    return [answers.get(sock) for sock in sockets]


def growth_after_churn(churn_once: Callable[[int], None], settle: float = 10.0) -> int:
    """Bytes the process grew by over `CONNECTIONS` connections, after a warm-up of
    `WARM_UP` (test_zeromq.py and test_grpc.py use it too). Some servers free a dropped
    connection's state on their own threads: growth over the limit is read again for up to
    `settle` seconds."""
    churn_once(WARM_UP)
    gc.collect()
    before = resident_bytes()
    churn_once(CONNECTIONS)
    deadline = time.monotonic() + settle
    while True:
        gc.collect()
        growth = resident_bytes() - before
        if growth < GROWTH_LIMIT or time.monotonic() >= deadline:
            return growth
        time.sleep(0.2)


@contextmanager
def connected(config: dict[str, object]) -> Iterator[InputEndpoint]:
    source = build_input(config, new_context("memory"))
    source.connect()
    try:
        yield source
    finally:
        source.close()


def settled(source: InputEndpoint, detail: str, timeout: float = 20.0) -> int:
    """`status().details[detail]` once it is 0, or its value at `timeout`."""
    deadline = time.monotonic() + timeout
    while source.status().details[detail] and time.monotonic() < deadline:
        time.sleep(0.02)
    return int(source.status().details[detail])


# -- http ------------------------------------------------------------------------------

#: A head announcing 100 bytes of body, and 10 of them: the request timeout answers 504.
PARTIAL_REQUEST = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 10


def http_opening(index: int) -> bytes:
    """Even: idle (the header-read timeout closes it); odd: a partial request."""
    return b"" if index % 2 == 0 else PARTIAL_REQUEST


def test_http_input_memory_returns_to_baseline_after_10000_connections() -> None:
    port = free_port()
    # no concurrency limit: every partial request waits for its body (else some get 503)
    config = http_config(
        port, header_read_timeout_ms=300, request_timeout_ms=300, concurrency_limit=0
    )
    with connected(config) as source:
        answers: list[bytes | None] = []

        def churn_once(count: int) -> None:
            answers[:] = churn(port, count, http_opening)

        growth = growth_after_churn(churn_once)
        idle, partial = answers[0::2], answers[1::2]
        left_open = [answer for answer in idle if answer != b""]
        assert not left_open, f"{len(left_open)} idle connection(s) answered {left_open[:3]}"
        assert all(a is not None and a.startswith(b"HTTP/1.1 504") for a in partial)
        assert growth < GROWTH_LIMIT, f"grew {growth / 2**20:.1f} MiB over {CONNECTIONS}"
        assert settled(source, "in_flight") == 0
        status: list[int] = []
        client = threading.Thread(target=lambda: status.append(call(port)[0]))
        client.start()
        batch = source.receive(1, 20)
        source.ack(batch)
        client.join(20)
        assert status == [202]


# -- websocket -------------------------------------------------------------------------

UPGRADE = (
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
#: A masked binary frame announcing 100 bytes, and 10 of them.
PARTIAL_FRAME = bytes([0x82, 0x80 | 100]) + b"\x01\x02\x03\x04" + b"x" * 10


def ws_partial_frame(index: int, sock: socket.socket) -> None:
    """Odd connections send part of a frame before they go; even ones go idle."""
    if index % 2:
        sock.sendall(PARTIAL_FRAME)


def test_websocket_input_memory_returns_to_baseline_after_10000_connections() -> None:
    port = free_port()
    with connected(ws_config(port, path="/ws")) as source:
        answers: list[bytes | None] = []

        def churn_once(count: int) -> None:
            answers[:] = churn(port, count, lambda _: UPGRADE, then=ws_partial_frame)

        growth = growth_after_churn(churn_once)
        assert all(a is not None and a.startswith(b"HTTP/1.1 101") for a in answers)
        assert settled(source, "connections") == 0, "the server kept dropped connections"
        assert growth < GROWTH_LIMIT, f"grew {growth / 2**20:.1f} MiB over {CONNECTIONS}"
        replies: list[object] = []
        client = threading.Thread(
            target=lambda: replies.append(client_exchange(f"ws://127.0.0.1:{port}/ws", [b"x"], 0))
        )
        client.start()
        batch = source.receive(1, 20)
        assert [m.payload for m in batch.messages] == [b"x"]
        source.ack(batch)
        client.join(20)
        assert replies == [[]]
