"""The `amqp` output's direct publishing link (`amqp.direct`, `amqp.frames`): the frames it
writes, how confirms settle a send, and its failures on the real RabbitMQ — nacks, a
channel the broker closes, a connection lost while idle, TLS.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mq_bridge import Message
from mq_bridge.endpoints.amqp.codec import encode_properties
from mq_bridge.endpoints.amqp.direct import _Settling
from mq_bridge.endpoints.amqp.frames import Publish
from mq_bridge.errors import EndpointError, SendError, is_retriable
from tests.mq_bridge.endpoints.test_amqp import _admin, config, delete_exchange, queue, receive_n
from tests.mq_bridge.helpers import open_input, open_output
from tests.tcp_proxy import TcpProxy, self_signed_context

__all__ = ["queue"]  # the fixture

# --- frames and settlement (no broker) ------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [{}, {"kind": "order.created", "é": "ü"}, {"correlation_id": "c1", "reply_to": "r", "x": "y"}],
)
@pytest.mark.parametrize("size", [0, 10, 300])
def test_the_frames_are_the_bytes_pika_writes(metadata: dict[str, str], size: int) -> None:
    import pika
    from pika import frame, spec

    message = Message(b"p" * size, metadata)
    ours: list[bytes] = []
    Publish(1, 131, "ex", True, 2).message(message, "rk", None, ours)
    properties = encode_properties(pika.BasicProperties, message, 2)
    method = spec.Basic.Publish(exchange="ex", routing_key="rk", mandatory=True)
    expected = frame.Method(1, method).marshal() + frame.Header(1, size, properties).marshal()
    for start in range(0, size, 123):  # frame_max 131: 123 bytes of body per frame
        expected += frame.Body(1, message.payload[start : start + 123]).marshal()
    assert b"".join(ours) == expected


def test_a_name_too_long_for_a_short_string_is_refused() -> None:
    with pytest.raises(ValueError, match="255"):
        Publish(1, 4096, "", True, 2).message(Message(b"x", {"k" * 300: "v"}), "q", None, [])


def _settling(count: int) -> _Settling:
    settling = _Settling([Message(b"%d" % i) for i in range(count)], "target")
    for index in range(count):
        settling.expect(11 + index, index)  # the channel's tags need not start at 1
    return settling


def test_multiple_acks_and_single_nacks_settle_exactly_their_messages() -> None:
    settling = _settling(5)
    settling.confirm(12, True, True)  # tags 11, 12
    settling.confirm(14, False, False)  # tag 14 nacked
    assert settling.remaining == 2 and set(settling.failures) == {3}
    settling.confirm(15, True, True)  # 13 and 15; 14 already settled
    assert settling.remaining == 0 and set(settling.failures) == {3}
    assert is_retriable(settling.failures[3])


def test_a_returned_message_fails_when_its_ack_comes() -> None:
    settling = _settling(3)
    settling.returned(settling.messages[1].assigned_id())
    settling.confirm(13, True, True)
    assert set(settling.failures) == {1} and not is_retriable(settling.failures[1])


def test_a_loss_fails_exactly_the_unconfirmed_and_the_unwritten() -> None:
    settling = _Settling([Message(b"%d" % i) for i in range(6)], "target")
    for index in range(4):  # 4 and 5 were never written
        settling.expect(1 + index, index)
    settling.written = 4
    settling.confirm(2, True, True)
    settling.fail_unconfirmed(EndpointError("gone"))
    assert set(settling.failures) == {2, 3, 4, 5}


# --- on the broker --------------------------------------------------------------------


@pytest.fixture
def bounded_queue(amqp_url: str) -> Iterator[str]:
    """A queue that takes 3 messages and rejects (nacks) the rest."""
    name = f"test-amqp-direct-{uuid.uuid4().hex[:10]}"
    arguments = {"x-max-length": 3, "x-overflow": "reject-publish"}
    _admin(amqp_url, lambda channel: channel.queue_declare(name, arguments=arguments))
    yield name
    _admin(amqp_url, lambda channel: channel.queue_delete(name))


@pytest.mark.amqp
def test_nacked_messages_of_a_batch_fail_alone_and_retriably(
    amqp_url: str, bounded_queue: str
) -> None:
    output = open_output(config(amqp_url, bounded_queue, no_declare_queue=True))
    with pytest.raises(SendError) as caught:
        output.send([Message(b"m%d" % i) for i in range(5)])
    assert set(caught.value.failures) == {3, 4} and caught.value.retriable
    output.close()


@pytest.mark.amqp
def test_a_channel_closed_by_the_broker_fails_the_send_then_reopens(
    amqp_url: str, queue: str
) -> None:
    exchange = f"test-amqp-direct-x-{uuid.uuid4().hex[:8]}"
    cfg = config(amqp_url, queue, exchange=exchange)
    output = open_output(cfg)
    source = open_input(cfg)
    try:
        delete_exchange(amqp_url, exchange)
        with pytest.raises(EndpointError, match="closed the channel") as caught:
            output.send([Message(b"nowhere")])
        assert not is_retriable(caught.value)
        _admin(amqp_url, lambda channel: channel.exchange_declare(exchange, "fanout", durable=True))
        _admin(amqp_url, lambda channel: channel.queue_bind(queue, exchange, queue))
        output.send([Message(b"again")])
        assert [m.payload for b in receive_n(source, 1) for m in b.messages] == [b"again"]
    finally:
        source.close()
        output.close()
        delete_exchange(amqp_url, exchange)


@pytest.mark.amqp
def test_a_link_lost_while_idle_is_reopened_by_the_next_send(amqp_url: str, queue: str) -> None:
    output = open_output(config(amqp_url, queue))
    direct = output._direct  # type: ignore[attr-defined]
    direct._sock.shutdown(socket.SHUT_RDWR)  # as if the broker went away meanwhile
    output.send([Message(b"after")])
    source = open_input(config(amqp_url, queue))
    assert [m.payload for b in receive_n(source, 1) for m in b.messages] == [b"after"]
    source.close()
    output.close()


# --- TLS: a local TLS proxy in front of RabbitMQ ------------------------------------------


@pytest.fixture
def tls_proxy(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    context = self_signed_context(tmp_path)
    proxy = TcpProxy(("127.0.0.1", 5672), tls=context)
    yield proxy.port, tmp_path / "cert.pem"
    proxy.close()


@pytest.mark.amqp
def test_sends_over_tls_are_confirmed(
    amqp_url: str, queue: str, tls_proxy: tuple[int, Path]
) -> None:
    port, ca_file = tls_proxy
    url = f"amqps://guest:guest@localhost:{port}/%2f"
    output = open_output(
        {"amqp": {"url": url, "queue": queue, "tls": {"ca_file": str(ca_file)}, "shared": False}}
    )
    assert output._direct._sock.version() is not None  # type: ignore[attr-defined]  # TLS
    output.send([Message(b"t%d" % i) for i in range(300)])
    output.send([Message(b"one")])
    output.close()
    source = open_input(config(amqp_url, queue))
    assert len([m for b in receive_n(source, 301) for m in b.messages]) == 301
    source.close()
