"""The output's synchronous client (`mqtt.publisher.DirectPublisher`) against real Mosquitto.

The shared broker (127.0.0.1:1883) for QoS 1/2 on v3 and v5; a private one (started here,
stopped by its PID) for credentials and TLS; a packet-aware proxy in front of the shared
one to lose the connection at an exact point, swallow acks, and count PINGREQs.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.endpoints.mqtt import publisher as publisher_module
from mq_bridge.endpoints.mqtt.codec import pack_properties, user_properties
from mq_bridge.endpoints.mqtt.wire import v5_properties
from mq_bridge.errors import (
    ConfigError,
    EndpointError,
    EndpointUnavailableError,
    SendError,
    is_retriable,
)
from mq_bridge.runtime.factory import build_output, new_context
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_mqtt import poll_all, session  # noqa: F401
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.mqtt

USER, PASSWORD = "mqb-user", "s3cret"


def test_properties_are_the_bytes_the_codec_packs() -> None:
    message = Message(b"x", {"kind": "order", "ünï": "cödé", "mqb.src.mqtt_topic": "t"})
    packed = v5_properties(message.metadata_view.items(), message.id_int)
    assert packed == pack_properties(user_properties(message))
    assert v5_properties({}.items(), 7) == pack_properties(
        [("mq_bridge.message_id", "0" * 31 + "7")]
    )


# -- QoS 1 and 2, v3 and v5, a batch wider than the window ------------------------------------


@pytest.mark.parametrize("protocol", ["v5", "v3"])
@pytest.mark.parametrize("qos", [1, 2])
def test_a_batch_wider_than_the_window_arrives_whole_and_in_order(
    session: Any,  # noqa: F811
    protocol: str,
    qos: int,
) -> None:
    config = session(protocol=protocol, qos=qos, max_inflight=3)
    sent = [Message(b"m%d" % n, {"n": str(n)}) for n in range(40)]
    with Consumer.from_config(config) as consumer, Publisher.from_config(config) as publisher:
        publisher.send_batch(sent[:20])
        for message in sent[20:30]:
            publisher.send(message)
        publisher.send_batch(sent[30:])
        got = poll_all(consumer, 40)
    assert [(m.payload, m.metadata, m.id) for m in got] == [
        (m.payload, m.metadata, m.assigned_id()) for m in sent
    ]


def test_concurrent_senders_share_the_connection(session: Any) -> None:  # noqa: F811
    config = session(qos=2, max_inflight=5)
    errors: list[BaseException] = []
    with Consumer.from_config(config) as consumer, Publisher.from_config(config) as publisher:

        def send(worker: int) -> None:
            try:
                for n in range(10):
                    publisher.send_batch([b"%d-%d-%d" % (worker, n, k) for k in range(7)])
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=send, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        got = poll_all(consumer, 280, timeout=30)
    assert errors == []
    assert sorted(m.payload for m in got) == sorted(
        b"%d-%d-%d" % (w, n, k) for w in range(4) for n in range(10) for k in range(7)
    )


# -- a private Mosquitto: credentials and TLS -------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def private_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A Mosquitto of this module's own: credentials required, a plain and a TLS listener."""
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.path.exists(binary) or shutil.which("openssl") is None:
        pytest.skip("needs mosquitto and openssl")
    cwd = tmp_path_factory.mktemp("mosquitto")
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=mqtt test CA",
        cwd=cwd,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=cwd,
    )  # fmt: skip
    (cwd / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=cwd,
    )  # fmt: skip
    (cwd / "acl").write_text(f"user {USER}\ntopic readwrite t/#\n")
    passwords = cwd / "passwords"
    passwords.write_text("")
    subprocess.run(["mosquitto_passwd", "-b", str(passwords), USER, PASSWORD], check=True)
    plain, tls = free_port(), free_port()
    (cwd / "mosquitto.conf").write_text(
        ("user root\n" if os.geteuid() == 0 else "")  # its files are in our temporary directory
        + "per_listener_settings false\nallow_anonymous false\npersistence false\n"
        f"password_file {passwords}\nacl_file {cwd / 'acl'}\n"
        f"listener {plain} 127.0.0.1\n"
        f"listener {tls} 127.0.0.1\ncafile {cwd / 'ca.pem'}\n"
        f"certfile {cwd / 'server.pem'}\nkeyfile {cwd / 'server.key'}\n"
    )
    process = subprocess.Popen(
        [binary, "-c", str(cwd / "mosquitto.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", tls), 0.2).close()
                socket.create_connection(("127.0.0.1", plain), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise AssertionError("the private mosquitto did not start") from None
                time.sleep(0.05)
        yield {"plain": plain, "tls": tls, "ca": str(cwd / "ca.pem")}
    finally:
        process.terminate()
        process.wait(10)


def _private(port: int, **options: Any) -> dict[str, Any]:
    topic = f"t/private-{uuid.uuid4().hex[:8]}"
    base = {"url": f"tcp://127.0.0.1:{port}", "topic": topic, "clean_session": True}
    return {"mqtt": {**base, **options}}


@pytest.mark.parametrize("protocol", ["v5", "v3"])
@pytest.mark.parametrize(
    ("credentials", "field"),
    [({}, "mqtt.username"), ({"username": USER, "password": "wrong"}, "mqtt.password")],
)
def test_refused_credentials_name_the_field(
    private_broker: dict[str, Any], protocol: str, credentials: dict[str, str], field: str
) -> None:
    config = _private(private_broker["plain"], protocol=protocol, **credentials)
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")) as caught:
        Publisher.from_config(config)
    assert "credentials" in str(caught.value) and "wrong" not in str(caught.value)


@pytest.mark.parametrize("protocol", ["v5", "v3"])
def test_credentials_in_options_or_url(private_broker: dict[str, Any], protocol: str) -> None:
    port = private_broker["plain"]
    config = _private(port, protocol=protocol, username=USER, password=PASSWORD)
    in_url = {"mqtt": {**config["mqtt"], "url": f"tcp://{USER}:{PASSWORD}@127.0.0.1:{port}"}}
    del in_url["mqtt"]["username"], in_url["mqtt"]["password"]
    with Consumer.from_config(config) as consumer:
        with Publisher.from_config(config) as publisher:
            publisher.send_batch([b"a", b"b"])
        with Publisher.from_config(in_url) as publisher:
            publisher.send_json({"c": 1})
        assert [m.payload for m in poll_all(consumer, 3)] == [b"a", b"b", b'{"c":1}']


@pytest.mark.parametrize("qos", [1, 2])
def test_a_v5_refusal_fails_the_messages_not_retriably(
    private_broker: dict[str, Any], qos: int
) -> None:
    auth = {"username": USER, "password": PASSWORD, "qos": qos}
    config = _private(private_broker["plain"], **auth)
    denied = {"mqtt": {**config["mqtt"], "topic": "denied/by-acl"}}
    with Publisher.from_config(denied) as publisher:
        with pytest.raises(EndpointError, match="Not authorized") as caught:
            publisher.send(b"one")
        assert not is_retriable(caught.value)
        with pytest.raises(SendError) as batch:
            publisher.send_batch([b"a", b"b"])
        assert sorted(batch.value.failures) == [0, 1] and not is_retriable(batch.value)
    with Publisher.from_config(config) as publisher:
        publisher.send(b"allowed")


@pytest.mark.parametrize("qos", [1, 2])
def test_tls_publishes_and_checks_the_certificate(private_broker: dict[str, Any], qos: int) -> None:
    tls = {"required": True, "ca_file": private_broker["ca"]}
    auth = {"username": USER, "password": PASSWORD, "qos": qos}
    config = _private(private_broker["tls"], tls=tls, **auth)
    with Consumer.from_config(config) as consumer:
        with Publisher.from_config(config) as publisher:
            publisher.send_batch([Message(b"m%d" % n) for n in range(30)])
            publisher.send(b"last")
        got = poll_all(consumer, 31)
    assert [m.payload for m in got] == [b"m%d" % n for n in range(30)] + [b"last"]
    untrusted = _private(private_broker["tls"], tls={"required": True}, **auth)
    with pytest.raises(EndpointUnavailableError, match="TLS"):
        Publisher.from_config(untrusted)


# -- a proxy in front of the shared broker: loss, silence, keep-alive -------------------------


class Proxy(TcpProxy):
    """Forwards each client to Mosquitto; `on_ack(count)` is asked before the broker's
    count-th PUBACK/PUBCOMP on a connection is forwarded: "forward", "drop" or "cut" (close
    both sides). Counts the client's PINGREQs."""

    def __init__(self, target: tuple[str, int], on_ack: Callable[[int], str]) -> None:
        self._on_ack = on_ack
        self.pings = 0
        super().__init__(target)

    def relay(self, source: socket.socket, sink: socket.socket, from_upstream: bool) -> None:
        buffer, acks = b"", 0
        while chunk := source.recv(65536):
            buffer += chunk
            while (size := _packet_size(buffer)) and len(buffer) >= size:
                packet, buffer = buffer[:size], buffer[size:]
                kind = packet[0] & 0xF0
                if not from_upstream and kind == 0xC0:
                    self.pings += 1
                if from_upstream and kind in (0x40, 0x70):
                    acks += 1
                    action = self._on_ack(acks)
                    if action == "cut":
                        return
                    if action == "drop":
                        continue
                sink.sendall(packet)


def _packet_size(buffer: bytes) -> int:
    """The whole size of the packet `buffer` starts with (0: its header is not all there)."""
    value, shift = 0, 0
    for index in range(1, min(5, len(buffer))):
        value |= (buffer[index] & 0x7F) << shift
        if not buffer[index] & 0x80:
            return index + 1 + value
        shift += 7
    return 0


@pytest.fixture
def proxy(mqtt_address: str) -> Iterator[Callable[..., Proxy]]:
    made: list[Proxy] = []
    host, port = mqtt_address.rsplit(":", 1)

    def make(on_ack: Callable[[int], str] = lambda _n: "forward") -> Proxy:
        made.append(Proxy((host, int(port)), on_ack))
        return made[-1]

    yield make
    for each in made:
        each.close()


def _through(proxy: Proxy, **options: Any) -> dict[str, Any]:
    topic = f"t/proxy-{uuid.uuid4().hex[:8]}"
    return {"mqtt": {"url": f"tcp://127.0.0.1:{proxy.port}", "topic": topic, **options}}


@pytest.mark.parametrize("protocol", ["v5", "v3"])
@pytest.mark.parametrize("qos", [1, 2])
def test_a_loss_mid_batch_fails_exactly_the_unacknowledged(
    proxy: Callable[..., Proxy], protocol: str, qos: int
) -> None:
    cut = {"armed": True}

    def on_ack(count: int) -> str:
        if cut["armed"] and count == 8:
            cut["armed"] = False
            return "cut"  # acks 1 to 7 reached the client
        return "forward"

    front = proxy(on_ack)
    output = build_output(_through(front, protocol=protocol, qos=qos), new_context("test"))
    output.connect()
    batch = [Message(b"%d" % n) for n in range(20)]
    with pytest.raises(SendError) as caught:
        output.send(batch)
    assert sorted(caught.value.failures) == list(range(7, 20))
    assert all(isinstance(e, EndpointUnavailableError) for e in caught.value.failures.values())
    assert is_retriable(caught.value)
    output.send([batch[n] for n in caught.value.failures])  # the retry, on a new connection
    assert front.connections == 2
    output.close()


def test_a_loss_before_any_ack_fails_the_send_retriably(proxy: Callable[..., Proxy]) -> None:
    front = proxy(lambda count: "cut")
    output = build_output(_through(front), new_context("test"))
    output.connect()
    with pytest.raises(EndpointUnavailableError) as caught:
        output.send_one(Message(b"lost"))
    assert is_retriable(caught.value)
    output.close()


def test_a_missing_ack_is_bounded(proxy: Callable[..., Proxy], monkeypatch: Any) -> None:
    monkeypatch.setattr(publisher_module, "ACK_TIMEOUT", 0.3)
    front = proxy(lambda count: "drop" if count == 2 else "forward")
    output = build_output(_through(front), new_context("test"))
    output.connect()
    with pytest.raises(SendError) as caught:
        output.send([Message(b"a"), Message(b"b"), Message(b"c")])
    assert sorted(caught.value.failures) == [1]  # only b's ack never came
    output.send_one(Message(b"again"))  # a new connection
    output.close()


def test_an_idle_connection_is_kept_alive(proxy: Callable[..., Proxy]) -> None:
    front = proxy()
    output = build_output(_through(front, keep_alive_seconds=1), new_context("test"))
    output.connect()
    deadline = time.monotonic() + 10
    while front.pings < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert front.pings >= 2
    output.send_one(Message(b"after idling"))
    assert front.connections == 1
    output.close()


def test_a_connection_closed_while_idle_is_replaced_before_the_send(
    proxy: Callable[..., Proxy], monkeypatch: Any
) -> None:
    monkeypatch.setattr(publisher_module, "_IDLE_CHECK", 0.0)  # every send checks first
    front = proxy()
    output = build_output(_through(front, keep_alive_seconds=0), new_context("test"))
    output.connect()
    output.send_one(Message(b"first"))
    sock = output._publisher._sock  # type: ignore[attr-defined]
    front.drop_connections()  # the broker side goes away while the publisher is idle
    select.select([sock], [], [], 10)  # the close has reached the client
    output.send_one(Message(b"second"))  # no error: it went on a new connection
    assert front.connections == 2
    output.close()
