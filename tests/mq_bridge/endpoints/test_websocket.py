"""The `websocket` endpoint: our server input and client output over loopback.

Clients are our websocket output or the `websockets` library's own client (to send exactly
the frames a test needs); every listener is on a free loopback port. Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.endpoints.base import Batch
from mq_bridge.errors import ConfigError, EndpointUnavailableError
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.helpers import free_port


def ws_config(port: int, **options: Any) -> dict[str, Any]:
    return {"websocket": {"url": f"127.0.0.1:{port}", **options}}


@contextmanager
def serving(handler: Callable[[Message], Any], port: int, **options: Any) -> Iterator[Route]:
    config = {"input": ws_config(port, **options), "output": {"response": {}}}
    with Route.from_config(config).with_handler(handler) as route:
        yield route


def client_exchange(url: str, frames: list[str | bytes], replies: int, **kwargs: Any) -> list[Any]:
    """Send `frames` with the websockets client and read `replies` frames back (20 s)."""
    from websockets.asyncio.client import connect

    async def main() -> list[Any]:
        async with connect(url, **kwargs) as ws:
            for frame in frames:
                await ws.send(frame)
            return [await ws.recv() for _ in range(replies)]

    return asyncio.run(asyncio.wait_for(main(), 20))


def test_each_frame_is_a_message_and_the_reply_goes_back_on_its_socket() -> None:
    seen: list[Message] = []

    def handle(message: Message) -> Message:
        seen.append(message)
        return message.with_payload(message.payload.upper())

    port = free_port()
    with serving(handle, port, path="/chat"):
        replies = client_exchange(
            f"ws://127.0.0.1:{port}/chat?room=1",
            ["hello", b"\x00\x01bin"],
            2,
            additional_headers={"X-Client": "tests", "message-id": "0x2a"},
        )
    assert replies == ["HELLO", b"\x00\x01BIN"]
    first, second = seen
    assert first.payload == b"hello"
    assert first.id == "00000000-0000-0000-0000-00000000002a"
    assert second.id is not None and second.id != first.id
    metadata = first.metadata
    assert metadata["ws_path"] == "/chat"
    assert metadata["ws_message_type"] == "text"
    assert metadata["ws_header.x-client"] == "tests"
    assert metadata["ws_peer_addr"].startswith("127.0.0.1:")
    assert second.metadata["ws_message_type"] == "binary"


def test_replies_go_to_their_own_connection() -> None:
    port = free_port()
    results: dict[int, list[Any]] = {}
    with serving(lambda m: m.with_payload(m.payload + b"!"), port):

        def client(n: int) -> None:
            frames: list[str | bytes] = [f"{n}-{i}" for i in range(20)]
            results[n] = client_exchange(f"ws://127.0.0.1:{port}/", frames, 20)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    for n in range(5):
        assert results[n] == [f"{n}-{i}!" for i in range(20)]


def test_output_request_returns_the_reply_and_send_delivers() -> None:
    port = free_port()
    topic = f"ws-out-{port}"
    sink = {"input": ws_config(port, path="/in"), "output": {"memory": {"topic": topic}}}
    with serving(lambda m: m.with_payload(b"re:" + m.payload), port, path="/rr"):
        with Publisher.from_config({"websocket": {"url": f"ws://127.0.0.1:{port}/rr"}}) as pub:
            request = Message(b"ping")
            reply = pub.request(request)
            assert reply.payload == b"re:ping" and reply.id == request.id
            assert pub.request(Message(b"again")).payload == b"re:again"
        with (
            Route.from_config(sink),
            Consumer.from_config({"memory": {"topic": topic}}) as out,
            Publisher.from_config({"websocket": {"url": f"ws://127.0.0.1:{port}/in"}}) as pub,
        ):
            pub.send_batch([Message(b"a"), Message(b"b")])
            got: list[Message] = []
            deadline = time.monotonic() + 20
            while len(got) < 2 and time.monotonic() < deadline:
                got += out.poll(max=10, timeout_ms=500)
    assert [m.payload for m in got] == [b"a", b"b"]


def test_unknown_path_basic_auth_and_max_connections_refuse_the_handshake() -> None:
    from websockets.exceptions import InvalidStatus

    port = free_port()
    token = base64.b64encode(b"alice:s3cret").decode()
    good = {"additional_headers": {"Authorization": f"Basic {token}"}}
    with serving(lambda m: m, port, path="/a", basic_auth=["alice", "s3cret"], max_connections=1):
        assert client_exchange(f"ws://127.0.0.1:{port}/a", ["x"], 1, **good) == ["x"]
        with pytest.raises(InvalidStatus, match="404"):
            client_exchange(f"ws://127.0.0.1:{port}/b", ["x"], 1, **good)
        with pytest.raises(InvalidStatus, match="401"):
            client_exchange(f"ws://127.0.0.1:{port}/a", ["x"], 1)
        bad = base64.b64encode(b"alice:nope").decode()
        with pytest.raises(InvalidStatus, match="401"):
            client_exchange(
                f"ws://127.0.0.1:{port}/a", ["x"], 1,
                additional_headers={"Authorization": f"Basic {bad}"},
            )  # fmt: skip
        url = f"ws://127.0.0.1:{port}/a"
        with Publisher.from_config({"websocket": {"url": url, "basic_auth": ["alice", "s3cret"]}}):
            time.sleep(0.2)  # the publisher's connection is the one allowed
            with pytest.raises(InvalidStatus, match="503"):
                client_exchange(url, ["x"], 1, **good)


def test_a_frame_beyond_max_message_bytes_closes_with_1009_and_the_server_lives_on() -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    port = free_port()

    async def oversized() -> int | None:
        async with connect(f"ws://127.0.0.1:{port}/", max_size=None) as ws:
            await ws.send(b"x" * 5000)
            try:
                await ws.recv()
            except ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
        return None

    with serving(lambda m: m, port, max_message_bytes=1000):
        assert asyncio.run(asyncio.wait_for(oversized(), 20)) == 1009
        assert client_exchange(f"ws://127.0.0.1:{port}/", ["ok"], 1) == ["ok"]


def test_a_refused_connection_fails_connect() -> None:
    with pytest.raises(EndpointUnavailableError):
        Publisher.from_config({"websocket": {"url": f"ws://127.0.0.1:{free_port()}/"}})


def test_direct_only_is_refused_naming_the_option() -> None:
    config = {"input": ws_config(free_port(), execution_mode="direct_only")}
    with pytest.raises(ConfigError, match="execution_mode"):
        Route.from_config({**config, "output": {"null": {}}}).start()


def test_input_lifecycle_interrupt_close_reopen() -> None:
    port = free_port()
    source = build_input(ws_config(port), new_context("t"))
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
    output = build_output({"websocket": {"url": f"ws://127.0.0.1:{port}/"}}, new_context("t"))
    output.connect()
    output.send([Message(b"after-reopen")])
    batch = source.receive(1, 10)
    assert [m.payload for m in batch.messages] == [b"after-reopen"]
    source.ack(batch)
    output.close()
    source.close()
    with pytest.raises(RuntimeError, match="closed"):
        output.send([Message(b"x")])


def test_tls_listener_and_wss_client(tmp_path: Any) -> None:
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", "server.key", "-out", "server.pem", "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        cwd=tmp_path, check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    cert, key = str(tmp_path / "server.pem"), str(tmp_path / "server.key")
    port = free_port()
    tls = {"required": True, "cert_file": cert, "key_file": key}
    target = {"url": f"wss://127.0.0.1:{port}/", "tls": {"ca_file": cert}}
    with (
        serving(lambda m: m.with_payload(b"secure:" + m.payload), port, tls=tls),
        Publisher.from_config({"websocket": target}) as publisher,
    ):
        assert publisher.request(Message(b"x")).payload == b"secure:x"
        with pytest.raises(EndpointUnavailableError):
            Publisher.from_config({"websocket": {"url": f"wss://127.0.0.1:{port}/"}})
