"""The `nats` endpoint on the real NATS server (JetStream): options, connecting, ack/nack,
ids and metadata, mqb.src.*, request/reply, core NATS, the seed's Consumer loop.

Every test uses its own stream and subject and deletes them (the server is shared; its
JetStream storage is small), and every client call is bounded.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.errors import ConfigError, EndpointUnavailableError
from mq_bridge.runtime.factory import build_input, new_context
from tests.helpers import free_port

SMALL = {"stream_max_bytes": 1 << 20, "stream_max_messages": 10_000}


# -- helpers (also used by cases.py and the other test_nats* files) ---------------------------


def run_nats(url: str, work: Any) -> Any:
    """Run ``await work(nc)`` on a fresh nats-py connection (bounded: 20 s)."""
    import nats

    async def main() -> Any:
        nc = await nats.connect(url, max_reconnect_attempts=1, connect_timeout=2)
        try:
            return await work(nc)
        finally:
            await nc.close()

    return asyncio.run(asyncio.wait_for(main(), 20))


def delete_stream(url: str, stream: str) -> None:
    """Delete `stream` (and so its consumers); a stream that is gone is fine."""
    import nats.js.errors

    async def delete(nc: Any) -> None:
        try:
            await nc.jetstream(timeout=5).delete_stream(stream)
        except nats.js.errors.NotFoundError:
            pass

    run_nats(url, delete)


def stream_names(url: str) -> list[str]:
    async def names(nc: Any) -> list[str]:
        return [info.config.name for info in await nc.jetstream(timeout=5).streams_info()]

    result: list[str] = run_nats(url, names)
    return result


@pytest.fixture
def config(nats_url: str) -> Iterator[dict[str, Any]]:
    """A JetStream endpoint config on a fresh stream (deleted afterwards)."""
    stream = f"t-{uuid.uuid4().hex[:10]}"
    try:
        yield {"nats": {"url": nats_url, "subject": f"{stream}.orders", "stream": stream, **SMALL}}
    finally:
        delete_stream(nats_url, stream)


def with_options(config: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {"nats": {**config["nats"], **options}}


def poll_n(consumer: Consumer, count: int, timeout: float = 10.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(max=count - len(got), timeout_ms=200)
    return got


# -- options and connecting (no broker needed) --------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"url": "http://127.0.0.1:4222", "subject": "s"}, "nats.url"),
        ({"url": "nats://127.0.0.1:4222"}, "nats.subject"),
        ({"url": "nats://127.0.0.1:4222", "subject": "a..b"}, "nats.subject"),
        ({"url": "nats://127.0.0.1:4222", "subject": "s", "stream": "a.b"}, "nats.stream"),
        ({"url": "nats://127.0.0.1:4222", "subject": "s", "prefetch_count": -1}, "nats.prefetch"),
        ({"url": "nats://127.0.0.1:4222", "subject": "s", "deliver_policy": "x"}, "deliver"),
        ({"url": "nats://127.0.0.1:4222", "subject": "s", "password": "p"}, "nats.password"),
    ],
)
def test_config_errors_name_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        Publisher.from_config({"nats": options})


def test_null_options_mean_the_peer_defaults() -> None:
    from mq_bridge.config.declarations import parse_options
    from mq_bridge.endpoints.nats import OPTIONS

    nulls = dict.fromkeys(["prefetch_count", "stream_max_bytes", "request_timeout_ms"], None)
    options = parse_options(OPTIONS, {"url": "nats://h:4222", "subject": "s", **nulls}, "nats")
    assert (options.prefetch_count, options.stream_max_bytes) == (10_000, 1 << 30)
    assert options.request_timeout_ms == 30_000
    assert options.effective_deliver_policy == "all"
    assert parse_options(OPTIONS, {"url": "h", "subject": "s", "subscriber_mode": True}, "n")
    assert OPTIONS.model_validate(
        {"url": "nats+tls://h:1", "subject": "s", "subscriber_mode": True}
    ).servers == ["tls://h:1"]


def test_a_refused_connection_fails_start_quickly() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    config = {"nats": {"url": url, "subject": "s", "stream": "s"}}
    started = time.monotonic()
    for make in (Publisher.from_config, Consumer.from_config):
        with pytest.raises(EndpointUnavailableError, match="cannot connect"):
            make(config)
    route = Route.from_config({"input": config, "output": {"null": None}})
    with pytest.raises(EndpointUnavailableError):
        route.start()
    assert time.monotonic() - started < 20


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nats", None)
    with pytest.raises(ConfigError, match=r"pip install 'twainmq\[nats\]'"):
        Publisher.from_config({"nats": {"url": "nats://127.0.0.1:1", "subject": "s"}})


# -- JetStream -------------------------------------------------------------------------------


@pytest.mark.nats
def test_id_and_metadata_round_trip_and_status_pending(config: dict[str, Any]) -> None:
    sent = [Message(b"a", {"kind": "k", "x": "1"}), Message(b"b", {"mqb.src.forged": "no"})]
    with Publisher.from_config(config) as publisher:
        publisher.send_batch(sent)
        publisher.send(Message(b"c", id="0f8c2a3e-5b1d-4c2e-9a7b-1234567890ab"))
    with Consumer.from_config(config) as consumer:
        assert consumer.status()["pending"] == 3
        got = poll_n(consumer, 3)
        assert [m.payload for m in got] == [b"a", b"b", b"c"]
        assert [m.id for m in got[:2]] == [m.id for m in sent]
        assert got[2].id == "0f8c2a3e-5b1d-4c2e-9a7b-1234567890ab"
        assert got[0].metadata == {"kind": "k", "x": "1"}
        assert got[1].metadata == {}  # mqb.src.* never travels
        consumer.commit()
        assert consumer.status()["pending"] == 0


@pytest.mark.nats
def test_a_message_without_an_id_header_gets_a_stable_id(config: dict[str, Any]) -> None:
    subject = config["nats"]["subject"]
    with Publisher.from_config(config):  # creates the stream
        run_nats(config["nats"]["url"], lambda nc: nc.jetstream(timeout=5).publish(subject, b"p"))
    with Consumer.from_config(config) as consumer:
        (first,) = poll_n(consumer, 1)
        consumer.nack()
        (again,) = poll_n(consumer, 1)
        assert first.payload == again.payload == b"p"
        assert first.id == again.id
        consumer.commit()


@pytest.mark.nats
def test_source_metadata_on_and_off(
    config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with Publisher.from_config(config) as publisher:
        publisher.send(Message(b"m", {"mqb.src.nats_subject": "forged"}))
    with Consumer.from_config(config) as consumer:
        (plain,) = poll_n(consumer, 1)
        consumer.nack()
    assert plain.metadata == {}
    with Consumer.from_config(with_options(config, source_metadata=True)) as consumer:
        (tagged,) = poll_n(consumer, 1)
        consumer.nack()
    assert tagged.metadata == {
        "mqb.src.nats_subject": config["nats"]["subject"],
        "mqb.src.nats_stream_sequence": "1",
    }
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    with Consumer.from_config(config) as consumer:
        (by_env,) = poll_n(consumer, 1)
        consumer.commit()
    assert by_env.metadata == tagged.metadata
    assert by_env.id == plain.id == tagged.id


@pytest.mark.nats
def test_nack_redelivers_at_once_and_close_without_ack_gives_back(config: dict[str, Any]) -> None:
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([b"0", b"1", b"2"])
    source = build_input(config, new_context("t"))
    source.connect()
    try:
        batch = source.receive(3, 5.0)
        assert [m.payload for m in batch.messages] == [b"0", b"1", b"2"]
        source.nack(batch)
        again = source.receive(3, 5.0)
        assert [m.id for m in again.messages] == [m.id for m in batch.messages]
        source.ack(batch_slice(again, 0, 1))
    finally:
        source.close()
    with Consumer.from_config(config) as consumer:
        assert [m.payload for m in poll_n(consumer, 2)] == [b"1", b"2"]
        consumer.commit()
        assert consumer.poll(max=10, timeout_ms=100) == []


def batch_slice(batch: Any, start: int, stop: int) -> Any:
    from mq_bridge.endpoints.base import Batch

    return Batch(batch.messages[start:stop], batch.token[start:stop])


@pytest.mark.nats
def test_the_seed_consumer_loop_runs_as_printed(nats_url: str) -> None:
    subject = f"orders{uuid.uuid4().hex[:8]}"
    before = set(stream_names(nats_url))
    try:
        consumer = Consumer.from_config({"nats": {"subject": subject, "url": nats_url}})
        with Publisher.from_config({"nats": {"subject": subject, "url": nats_url}}) as publisher:
            publisher.send_batch([Message.from_json({"n": n}) for n in range(1200)])
        sizes, seen = [], []
        while not consumer.exhausted:
            batch = consumer.poll(max=500, timeout_ms=1000)  # [] on timeout
            if not batch:
                break
            seen += [message.json()["n"] for message in batch]
            sizes.append(len(batch))
            consumer.commit()
        consumer.close()
        assert sizes == [500, 500, 200]  # full batches from a backlog (the peer returns ~10)
        assert seen == list(range(1200))
    finally:
        for stream in set(stream_names(nats_url)) - before:
            delete_stream(nats_url, stream)
    assert subject not in stream_names(nats_url)


@pytest.mark.nats
def test_subscriber_mode_sees_new_messages_and_leaves_no_consumer(config: dict[str, Any]) -> None:
    with Publisher.from_config(config) as publisher:
        publisher.send(b"old")
        with Consumer.from_config(with_options(config, subscriber_mode=True)) as consumer:
            publisher.send(b"new")
            assert [m.payload for m in poll_n(consumer, 1)] == [b"new"]
            consumer.commit()

    async def consumers(nc: Any) -> list[Any]:
        js = nc.jetstream(timeout=5)
        return list(await js.consumers_info(config["nats"]["stream"]))

    assert run_nats(config["nats"]["url"], consumers) == []


@pytest.mark.nats
def test_route_forwards_jetstream_to_jetstream(config: dict[str, Any], nats_url: str) -> None:
    out_stream = f"t-{uuid.uuid4().hex[:10]}"
    out = {"nats": {"url": nats_url, "subject": out_stream, "stream": out_stream, **SMALL}}
    try:
        route = Route.from_config({"input": config, "output": out, "batch_size": 64})
        route.with_handler(lambda m: m.with_payload(m.payload.upper()))
        with Publisher.from_config(config) as publisher, route:
            publisher.send_batch([b"a%d" % n for n in range(100)])
            with Consumer.from_config(out) as consumer:
                got = poll_n(consumer, 100)
                consumer.commit()
        assert sorted(m.payload for m in got) == sorted(b"A%d" % n for n in range(100))
    finally:
        delete_stream(nats_url, out_stream)


@pytest.mark.nats
def test_interrupt_and_timeouts_bound_receive(config: dict[str, Any]) -> None:
    source = build_input(config, new_context("t"))
    source.connect()
    try:
        started = time.monotonic()
        assert not source.receive(10, 0.2)
        assert 0.15 < time.monotonic() - started < 2
        result: list[Any] = []
        reader = threading.Thread(target=lambda: result.append(source.receive(1, None)))
        reader.start()
        time.sleep(0.1)
        source.interrupt()
        reader.join(5)
        assert not reader.is_alive() and not result[0]
    finally:
        source.close()


# -- core NATS and request/reply ----------------------------------------------------------------


@pytest.mark.nats
def test_core_nats_publish_and_subscribe(nats_url: str) -> None:
    subject = f"core.{uuid.uuid4().hex[:10]}"
    config = {"nats": {"url": nats_url, "subject": subject, "no_jetstream": True}}
    with Consumer.from_config(config) as consumer, Publisher.from_config(config) as publisher:
        publisher.send(Message(b"x", {"k": "v"}))
        publisher.send_batch([b"y", b"z"])
        got = poll_n(consumer, 3)
        assert [m.payload for m in got] == [b"x", b"y", b"z"]
        assert got[0].metadata == {"k": "v"}
        consumer.commit()
        assert consumer.status()["pending"] is None


@pytest.mark.nats
def test_request_reply_through_a_route_with_a_response_output(nats_url: str) -> None:
    subject = f"rpc.{uuid.uuid4().hex[:10]}"
    serve = {"nats": {"url": nats_url, "subject": subject, "no_jetstream": True}}
    ask = {"nats": {**serve["nats"], "request_reply": True, "request_timeout_ms": 5000}}
    route = Route.from_config({"input": serve, "output": {"response": {}}, "batch_size": 8})
    route.with_handler(lambda m: m.with_json({"echo": m.json(), "kind": m.get("kind")}))
    with route, Publisher.from_config(ask) as publisher:
        request = Message.from_json({"q": 1}, {"kind": "ask"})
        reply = publisher.request(request)
        assert reply.json() == {"echo": {"q": 1}, "kind": "ask"}
        assert reply.id == request.id
        assert [publisher.request_json({"q": n}).json()["echo"]["q"] for n in range(5)] == list(
            range(5)
        )


@pytest.mark.nats
def test_a_request_nobody_serves_fails_fast(nats_url: str) -> None:
    subject = f"rpc.{uuid.uuid4().hex[:10]}"
    ask = {"nats": {"url": nats_url, "subject": subject, "no_jetstream": True}}
    with Publisher.from_config(with_options(ask, request_reply=True)) as publisher:
        started = time.monotonic()
        with pytest.raises(EndpointUnavailableError, match="no responders"):
            publisher.request(Message(b"?"))
        assert time.monotonic() - started < 5


@pytest.mark.nats
def test_a_publish_no_stream_captures_fails_clearly(config: dict[str, Any]) -> None:
    with Publisher.from_config(config):  # creates the stream, capturing "<stream>.>"
        pass
    stray = with_options(config, subject=f"elsewhere-{uuid.uuid4().hex[:8]}")
    with (
        Publisher.from_config(stray) as publisher,
        pytest.raises(EndpointUnavailableError, match="no responders"),
    ):
        publisher.send(b"lost?")


# -- the direct client: credentials, TLS, large messages (a private nats-server) --------------


@pytest.fixture
def private_nats(tmp_path: Any) -> Iterator[Any]:
    """``start(*args)``: a nats-server of this test's own (JetStream in `tmp_path`), stopped
    by its PID afterwards; returns its port."""
    import shutil
    import subprocess

    binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not os.path.exists(binary):
        pytest.skip("nats-server is not installed")
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> int:
        port = free_port()
        store = tmp_path / f"js{port}"
        command = [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store), *args]
        started.append(subprocess.Popen(command, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return port
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the private nats-server did not start")

    try:
        yield start
    finally:
        for process in started:
            process.terminate()
            process.wait(10)


def round_trip(config: dict[str, Any]) -> None:
    """A batch, one large message (many socket reads) and one more, back in order."""
    big = bytes(range(256)) * 1200  # 300 KB
    sent = [Message(b"m%d" % n, {"n": str(n)}) for n in range(50)] + [Message(big)]
    with Publisher.from_config(config) as publisher:
        publisher.send_batch(sent[:50])
        publisher.send(sent[50])
        publisher.send_json({"last": True})
    with Consumer.from_config(config) as consumer:
        got = poll_n(consumer, 52)
        consumer.commit()
    assert [m.payload for m in got[:51]] == [m.payload for m in sent[:51]]
    assert [m.metadata for m in got[:50]] == [{"n": str(n)} for n in range(50)]
    assert got[51].json() == {"last": True}


@pytest.mark.nats
def test_credentials_and_large_messages_on_a_private_server(private_nats: Any) -> None:
    port = private_nats("--user", "bridge", "--pass", "s3cret")
    limits = {"stream_max_bytes": 4 << 20, "stream_max_messages": 1000}
    base = {"subject": "auth.in", "stream": "auth", **limits}
    in_options = {"url": f"nats://127.0.0.1:{port}", "username": "bridge", "password": "s3cret"}
    round_trip({"nats": {**base, **in_options}})
    round_trip({"nats": {**base, "url": f"nats://bridge:s3cret@127.0.0.1:{port}"}})
    with pytest.raises(ConfigError, match="credentials"):
        Publisher.from_config({"nats": {**base, **in_options, "password": "wrong"}})


@pytest.mark.nats
def test_tls_servers_work_through_nats_py(private_nats: Any, tmp_path: Any) -> None:
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    port = private_nats("--tls", "--tlscert", str(cert), "--tlskey", str(key))
    limits = {"stream_max_bytes": 4 << 20, "stream_max_messages": 1000}
    base = {"subject": "tls.in", "stream": "tls", **limits}
    tls = {"ca_file": str(cert)}
    round_trip({"nats": {**base, "url": f"tls://127.0.0.1:{port}", "tls": tls}})
    # A plain URL to a server that requires TLS: upgraded, as nats-py does.
    plain = {"url": f"nats://127.0.0.1:{port}", "tls": {**tls, "required": True}}
    round_trip({"nats": {**base, **plain}})


@pytest.mark.nats
def test_threads_share_one_connection(config: dict[str, Any], nats_url: str) -> None:
    """Senders on several threads, and a pipelined route (its acker acks while its reader
    reads): every message arrives, the route's input ends with nothing pending."""
    out_stream = f"t-{uuid.uuid4().hex[:10]}"
    out = {"nats": {"url": nats_url, "subject": out_stream, "stream": out_stream, **SMALL}}
    try:
        with Publisher.from_config(config) as publisher:

            def send(thread: int) -> None:
                for n in range(100):
                    publisher.send(Message(b"%d-%d" % (thread, n)))

            senders = [threading.Thread(target=send, args=(t,)) for t in range(4)]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join(30)
        route = Route.from_config(
            {"input": config, "output": out, "batch_size": 32, "concurrency": 4}
        )
        with route.with_handler(lambda m: m), Consumer.from_config(out) as consumer:
            got = poll_n(consumer, 400, timeout=20)
            consumer.commit()
        expected = {b"%d-%d" % (t, n) for t in range(4) for n in range(100)}
        assert {m.payload for m in got} == expected
        with Consumer.from_config(config) as source:
            assert source.status()["pending"] == 0
            assert source.poll(max=10, timeout_ms=300) == []
    finally:
        delete_stream(nats_url, out_stream)
