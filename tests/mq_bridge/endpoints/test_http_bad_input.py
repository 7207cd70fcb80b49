"""The `http` input against bad and hostile clients, over raw loopback sockets: slow
heads and bodies, malformed requests, oversized heads, connections dropped mid-request,
thousands of connections opened and dropped. Each is answered with a status or closed, and
the server keeps serving afterwards. Also TLS and the input's lifecycle.
"""

from __future__ import annotations

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
from tests.mq_bridge.endpoints.test_http import call, free_port, http_config, serving
from tests.mq_bridge.endpoints.test_network_memory import churn

REQUEST = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"


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
