"""The `http` input against bad and hostile clients, over raw loopback sockets: slow
heads and bodies, malformed requests, oversized heads, connections dropped mid-request,
thousands of connections opened and dropped. Each is answered with a status or closed, and
the server keeps serving afterwards; a malformed request is one short log line and a count
in the status, never a traceback (also for the websocket input on the same listeners).
Also TLS and the input's lifecycle.
"""

from __future__ import annotations

import logging
import shutil
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from mq_bridge import Message, Publisher
from mq_bridge.endpoints.base import Batch
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_http import call, http_config, serving
from tests.mq_bridge.endpoints.test_network_memory import churn

REQUEST = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
CHUNKED = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
#: Requests no HTTP/1.1 server may accept, each answered 400 (431 for a head too large).
MALFORMED = [
    b"GARBAGE\r\n\r\n",  # not a request line
    b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",  # no such version
    b"GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n",  # spaces in the target
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    b"POST / HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n",  # a space in a header name
    b"POST / HTTP/1.1\r\nHost: x\r\n: no-name\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n",  # a NUL in a header value
    CHUNKED + b"\r\nzz\r\nhello\r\n0\r\n\r\n",  # a chunk size that is no number
    CHUNKED + b"\r\n5;\x01=x\r\nhello\r\n0\r\n\r\n",  # a control character in an extension
    CHUNKED + b"Content-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",  # both framings
    b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",  # not chunked last
    b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",  # a huge header
    b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # a huge request line
]


def raw(port: int, data: bytes, timeout: float = 20) -> bytes:
    """Send `data` on a fresh connection and read until the server closes or answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return sock.recv(65536)


def closed_within(sock: socket.socket, drip: bytes, interval: float) -> int:
    """Drip `drip` one byte per `interval`; the number of bytes sent before the server
    closed the connection (len(drip) when it never did)."""
    sock.settimeout(interval)
    for sent, byte in enumerate(drip):
        try:
            sock.sendall(bytes([byte]))
            if sock.recv(65536) == b"":
                return sent
        except TimeoutError:
            continue
        except OSError:
            return sent
    return len(drip)


def test_a_client_dripping_its_head_is_disconnected_by_the_header_timeout() -> None:
    port = free_port()
    with serving(lambda m: m, port, header_read_timeout_ms=300):
        drip = b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sent = closed_within(sock, drip, 0.05)
        assert sent < len(drip)
        assert call(port)[0] == 200  # the server serves on


def test_a_client_dripping_its_body_gets_504_at_the_request_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    with serving(lambda m: m, port, request_timeout_ms=300):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
            sock.settimeout(0.05)
            answer = b""
            for _ in range(400):
                try:
                    sock.sendall(b"x")
                    answer = sock.recv(65536)
                    break
                except TimeoutError:
                    continue
        assert answer.startswith(b"HTTP/1.1 504")
        assert call(port)[0] == 200
    # aiohttp drains the unread body after the 504; the body's timeout must end that drain
    # quietly (BodyTimeout is a TimeoutError), not as an "Unhandled exception" per client
    assert [r.getMessage() for r in caplog.records if r.name == "aiohttp.server"] == []


def test_malformed_requests_get_400_and_oversized_heads_are_refused() -> None:
    port = free_port()
    with serving(lambda m: m, port):
        assert raw(port, b"GARBAGE\r\n\r\n")[9:12] == b"400"
        assert raw(port, b"POST / HTTP/1.1\r\nContent-Length: nope\r\n\r\n")[9:12] == b"400"
        huge = b"POST / HTTP/1.1\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
        assert raw(port, huge)[9:12] in (b"400", b"431")
        assert call(port)[0] == 200


def test_connections_dropped_at_every_stage_leave_the_input_healthy() -> None:
    release = threading.Event()
    port = free_port()
    source = build_input(http_config(port), new_context("bad-input"))
    source.connect()
    try:
        # 1. 10,000 connections opened and dropped (test_network_memory.py: idle and
        #    half-sent ones that the server closes, and the memory they leave behind)
        churn(port, 10_000, lambda _: b"", wait=False)
        # 2. half a request, then gone
        churn(port, 200, lambda _: REQUEST[:20], wait=False)
        # 3. whole requests whose clients leave before the answer
        churn(port, 50, lambda _: REQUEST, wait=False)
        received = 0
        deadline = time.monotonic() + 20
        while received < 50 and time.monotonic() < deadline:
            batch = source.receive(100, 0.2)
            received += len(batch)
            source.ack(batch)
        assert received == 50
        # 4. still serving, and nothing left in flight
        answer: list[int] = []
        client = threading.Thread(target=lambda: answer.append(call(port)[0]))
        client.start()
        batch = source.receive(1, 20)
        source.ack(batch)
        client.join(20)
        assert answer == [202]
        deadline = time.monotonic() + 10
        while source.status().details["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.02)
        status = source.status()
        assert status.healthy and status.pending == 0 and status.details["in_flight"] == 0
    finally:
        release.set()
        source.close()


def test_input_lifecycle_interrupt_close_reopen() -> None:
    port = free_port()
    source = build_input(http_config(port), new_context("t"))
    source.connect()
    result: list[Batch] = []
    reader = threading.Thread(target=lambda: result.append(source.receive(1, 30.0)))
    reader.start()
    time.sleep(0.05)
    source.interrupt()
    reader.join(10)
    assert not reader.is_alive() and not result[0]
    source.close()
    source.close()
    with pytest.raises(RuntimeError, match="closed"):
        source.receive(1, 0.01)
    source.connect()
    output = build_output({"http": {"url": f"http://127.0.0.1:{port}/"}}, new_context("t"))
    output.connect()
    sender = threading.Thread(target=lambda: output.send([Message(b"after-reopen")]))
    sender.start()
    batch = source.receive(1, 10)
    assert [m.payload for m in batch.messages] == [b"after-reopen"]
    source.ack(batch)
    sender.join(10)
    output.close()
    source.close()
    with pytest.raises(RuntimeError, match="closed"):
        output.send([Message(b"x")])


def test_close_answers_503_to_requests_not_handed_out() -> None:
    port = free_port()
    source = build_input(http_config(port), new_context("t"))
    source.connect()
    answer: list[int] = []
    client = threading.Thread(target=lambda: answer.append(call(port)[0]))
    client.start()
    deadline = time.monotonic() + 10
    while not source.status().pending and time.monotonic() < deadline:
        time.sleep(0.01)
    source.close()
    client.join(20)
    assert answer == [503]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cwd = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", "server.key", "-out", "server.pem", "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        cwd=cwd, check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cwd / "server.pem", cwd / "server.key"


def test_tls_listener_and_client(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    port = free_port()
    tls = {"required": True, "cert_file": str(cert), "key_file": str(key)}
    with serving(lambda m: m.with_payload(b"secure:" + m.payload), port, tls=tls):
        target = {"url": f"https://127.0.0.1:{port}/", "tls": {"ca_file": str(cert)}}
        with Publisher.from_config({"http": target}) as publisher:
            assert publisher.request(Message(b"x")).payload == b"secure:x"
        untrusted = {"url": f"https://127.0.0.1:{port}/"}
        with (
            Publisher.from_config({"http": untrusted}) as publisher,
            pytest.raises(Exception, match=r"(?i)certificate"),
        ):
            publisher.send(Message(b"x"))
        context = ssl.create_default_context(cafile=str(cert))
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
            context.wrap_socket(sock, server_hostname="127.0.0.1") as tls_sock,
        ):
            tls_sock.sendall(REQUEST)
            assert tls_sock.recv(65536).startswith(b"HTTP/1.1 200")
        # plain HTTP on the TLS port is not served
        assert not raw(port, REQUEST).startswith(b"HTTP/1.1 200")


def wait_for(condition: object, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.02)


def test_malformed_requests_are_one_short_log_line_each_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aiohttp logs each with a traceback at ERROR (15 of them: 9.4 KB of log); here each
    is at most one WARNING line (rate-limited), the traceback is at DEBUG, and the input's
    status counts them."""
    caplog.set_level(logging.WARNING)  # what `mq-bridge run` shows by default
    port = free_port()
    source = build_input(http_config(port), new_context("bad-input"))
    source.connect()
    try:
        assert source.status().details["malformed_requests"] == 0
        for data in MALFORMED:
            assert raw(port, data)[9:12] in (b"400", b"431"), data[:40]
        count = len(MALFORMED)
        wait_for(lambda: source.status().details["malformed_requests"] >= count)
        assert source.status().details["malformed_requests"] == count
        answer: list[int] = []  # still serving (and a good request is not counted):
        client = threading.Thread(target=lambda: answer.append(call(port)[0]))
        client.start()
        source.ack(source.receive(1, 20))
        client.join(20)
        assert answer == [202]
        assert source.status().details["malformed_requests"] == count
    finally:
        source.close()
    shown = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert 0 < len(shown) <= count
    for record in shown:
        line = record.getMessage()
        assert record.exc_info is None and "\n" not in line and len(line) < 300, line
        assert "malformed request from 127.0.0.1" in line
    assert "Traceback" not in caplog.text
    assert sum(len(record.getMessage()) for record in shown) < 3000  # was 9.4 KB


def test_the_traceback_of_a_malformed_request_is_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()
    with serving(lambda m: m, port):
        # (not MALFORMED[0]: aiohttp itself logs a bad method on a first request at DEBUG)
        assert raw(port, MALFORMED[3])[9:12] == b"400"
        wait_for(lambda: any(record.exc_info for record in caplog.records))
    with_traceback = [record for record in caplog.records if record.exc_info]
    assert with_traceback and {record.levelno for record in with_traceback} == {logging.DEBUG}


def test_a_bad_websocket_handshake_or_frame_is_one_line_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    port = free_port()
    config = {"websocket": {"url": f"127.0.0.1:{port}", "path": "/ws"}}
    source = build_input(config, new_context("bad-websocket"))
    source.connect()
    upgrade = (
        b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
    )
    try:
        assert raw(port, upgrade + b"not-a-key\r\n\r\n")[9:12] == b"400"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(upgrade + b"dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            assert sock.recv(65536)[9:12] == b"101"
            sock.sendall(b"\x83\x80\x00\x00\x00\x00")  # opcode 3 is reserved: a bad frame
            sock.recv(65536)  # the close frame (1002)
        wait_for(lambda: source.status().details["malformed_requests"] >= 2)
        assert source.status().details["malformed_requests"] == 2
        assert raw(port, MALFORMED[0])[9:12] == b"400"  # the shared listener counts for both
        wait_for(lambda: source.status().details["malformed_requests"] >= 3)
    finally:
        source.close()
    shown = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(shown) == 3, shown
    assert "websocket: handshake refused" in shown[0] and "websocket: " in shown[1]
    assert "Traceback" not in caplog.text


def test_a_body_broken_after_its_head_is_400_one_line_and_counted_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With aiohttp's Python parser (no C extension: AIOHTTP_NO_EXTENSIONS, PyPy), chunked
    framing that breaks after the head was read surfaces in the handler as it reads the
    body, and once more when aiohttp drains it: one 400, one line, one count."""
    import aiohttp.http_parser
    import aiohttp.web_protocol

    monkeypatch.setattr(
        aiohttp.web_protocol, "HttpRequestParser", aiohttp.http_parser.HttpRequestParserPy
    )
    caplog.set_level(logging.WARNING)
    port = free_port()
    source = build_input(http_config(port), new_context("bad-body"))
    source.connect()
    try:
        for rest in (b"zz\r\nhello\r\n0\r\n\r\n", b"3\r\nabcXX\r\n0\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(CHUNKED + b"\r\n")
                time.sleep(0.2)  # the head is read and handed to the input first
                sock.sendall(rest)
                assert sock.recv(65536)[9:12] == b"400"
        wait_for(lambda: source.status().details["malformed_requests"] >= 2)
        time.sleep(0.2)
        assert source.status().details["malformed_requests"] == 2
    finally:
        source.close()
    shown = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(shown) == 2 and all("TransferEncodingError" in line for line in shown), shown
    assert "Traceback" not in caplog.text
