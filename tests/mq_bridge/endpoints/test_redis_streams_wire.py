"""The `redis_streams` hot path: RESP encoding and decoding, and the raw command channel.

The codec is pure (no server); the channel tests use the real Redis (tests/brokers.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import hiredis
import pytest
import redis

from mq_bridge import Message
from mq_bridge.endpoints.redis import commands
from mq_bridge.endpoints.redis.codec import XaddEncoder, decode_entries
from mq_bridge.endpoints.redis.commands import CommandChannel, pack
from mq_bridge.errors import SendError
from mq_bridge.runtime.factory import build_input, build_output, new_context

# --- encoding: the template gives the bytes a packer gives ---------------------------------


def packed_xadd(stream: str, trim: tuple[Any, ...], message: Message) -> bytes:
    """The XADD as hiredis packs it from mq-bridge's field list (the reference)."""
    fields: list[Any] = ["XADD", stream, *trim, "*", b"payload", message.payload]
    fields += [b"mqb_message_id", b"%032x" % message.id_int]
    for key, value in message.metadata_view.items():
        if key not in ("payload", "mqb_message_id") and not key.startswith("mqb.src."):
            fields += [key, value]
    return bytes(hiredis.pack_command(tuple(fields)))


MESSAGES = [
    Message(b"plain", id=1),
    Message(b"100% \r\n binary \x00\xff", {"kind": "k"}, id=(1 << 128) - 1),
    Message(b"", {"k%d": "%s %%", "unicod\u00e9": "\u2603"}),
    Message(b"x", {"payload": "taken", "mqb_message_id": "taken", "mqb.src.kafka": "1"}),
    Message(b"same metadata as before, another dict", {"kind": "k"}),
    Message(b"y", {"kind": "k"}),
]


@pytest.mark.parametrize("trim", [(), ("MAXLEN", "~", 1000), ("MAXLEN", 5)])
def test_the_encoder_writes_the_bytes_a_packer_writes(trim: tuple[Any, ...]) -> None:
    stream = "orders-%s-100%"
    encoder = XaddEncoder(stream, trim)
    expected = [packed_xadd(stream, trim, m) for m in MESSAGES]
    assert encoder.encode(MESSAGES) == b"".join(expected)
    assert b"".join(encoder.chunks(MESSAGES, 4)) == b"".join(expected)
    for message, command in zip(MESSAGES, expected):
        assert encoder.encode_one(message.payload, message.metadata_view, message.id_int) == (
            command
        )


def test_a_message_without_an_id_gets_one_as_it_is_encoded() -> None:
    message = Message(b"new")
    assert message.id is None
    command = XaddEncoder("s").encode([message])
    assert message.id is not None  # kept: sending it again sends the same id
    assert command == packed_xadd("s", (), message)


def test_the_pure_python_packer_matches_hiredis(monkeypatch: pytest.MonkeyPatch) -> None:
    command = ("XACK", "stream", "group", b"1-0", b"2-5", 7, "\u00e9")
    expected = pack(command)
    monkeypatch.setattr(commands, "_hiredis", None)
    assert pack(command) == expected


# --- decoding: entries as hiredis parses them ------------------------------------------


def entry(entry_id: bytes, *fields: bytes) -> list[Any]:
    return [entry_id, list(fields)]


ID_A = b"0190d3a67b1c7e0a9c515a1b2c3d4e5f"


def test_entries_in_the_usual_layout_share_equal_metadata() -> None:
    entries = [
        entry(b"1-0", b"payload", b"a", b"mqb_message_id", ID_A, b"kind", b"k"),
        entry(b"1-1", b"payload", b"b", b"mqb_message_id", b"%032x" % 2, b"kind", b"k"),
        entry(b"1-2", b"payload", b"c", b"mqb_message_id", b"%032x" % 3),
        entry(b"1-3", b"payload", b"d", b"mqb_message_id", b"%032x" % 4, b"kind", b"other"),
    ]
    a, b, c, d = decode_entries(entries, "s", False)
    assert (a.payload, a.id, a.metadata) == (b"a", str(uuid.UUID(ID_A.decode())), {"kind": "k"})
    assert a.metadata_view is b.metadata_view  # one dict for equal metadata
    assert (b.id_int, c.id_int, d.id_int) == (2, 3, 4)
    assert c.metadata == {} and d.metadata == {"kind": "other"}


def test_other_layouts_and_fields_take_the_general_path() -> None:
    entries = [
        entry(b"5-0", b"mqb_message_id", ID_A, b"payload", b"reordered"),
        entry(b"5-1", b"payload", b"p", b"mqb_message_id", b"not-hex-but-thirty-two-chars!!!!"),
        entry(b"5-2", b"payload", b"p", b"mqb_message_id", b"12345", b"k", b"v"),
        entry(b"5-3", b"data", b"no payload field"),
        entry(b"5-4", b"payload", b"p", b"mqb_message_id", ID_A, b"\xff", b"v", b"k", b"\xfe"),
        entry(b"5-5", b"payload", b"p", b"mqb_message_id", ID_A, b"mqb.src.x", b"forged"),
    ]
    reordered, bad_id, numbered, foreign, binary, forged = decode_entries(entries, "s", False)
    assert (reordered.payload, reordered.id_int) == (b"reordered", int(ID_A, 16))
    again = decode_entries(entries[1:2], "s", False)[0]
    assert bad_id.id_int == again.id_int  # a stable id from the stream and entry id
    assert numbered.id_int == 12345 and numbered.metadata == {"k": "v"}
    assert (foreign.payload, foreign.metadata) == (b"", {"data": "no payload field"})
    assert binary.metadata == {} and forged.metadata == {}  # not text / forged: left out


def test_source_metadata_is_added_per_entry() -> None:
    entries = [entry(b"7-0", b"payload", b"a", b"mqb_message_id", ID_A, b"kind", b"k")]
    (message,) = decode_entries(entries, "orders", True)
    assert message.metadata == {
        "kind": "k",
        "mqb.src.redis_stream": "orders",
        "mqb.src.redis_entry_id": "7-0",
        "mqb.src.redis_stream_id": "7-0",
    }


# --- the raw channel on the real Redis ----------------------------------------------------


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url, socket_timeout=5) as connection:
        yield connection


@pytest.fixture
def stream(client: redis.Redis) -> Iterator[str]:
    name = f"test-wire-{uuid.uuid4().hex[:10]}"
    yield name
    client.delete(name)


@pytest.fixture(params=["hiredis", "redis-py parser"])
def channel(request: pytest.FixtureRequest, client: redis.Redis) -> Iterator[CommandChannel]:
    channel = CommandChannel(client)
    if request.param != "hiredis":
        channel._reader_type = None  # the path taken when hiredis is not installed
    yield channel
    channel.close()


def test_an_error_reply_fails_only_its_command(
    channel: CommandChannel, client: redis.Redis, stream: str
) -> None:
    client.set(f"{stream}-string", "not a stream")
    try:
        batch = [
            pack(("XADD", stream, "*", "n", 1)),
            pack(("XADD", f"{stream}-string", "*", "n", 2)),  # WRONGTYPE
            pack(("XADD", stream, "*", "n", 3)),
        ]
        first, failed, last = channel.call(batch, 3)
        assert isinstance(failed, Exception) and "WRONGTYPE" in str(failed)
        assert isinstance(first, bytes) and isinstance(last, bytes)
        assert channel.call_one(("XLEN", stream)) == 2  # still in step
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            channel.call_one(("XLEN", f"{stream}-string"))
    finally:
        client.delete(f"{stream}-string")


def test_a_connection_the_server_closed_is_replaced_once(
    channel: CommandChannel, client: redis.Redis, stream: str
) -> None:
    client_id = channel.call_one(("CLIENT", "ID"))
    client.client_kill_filter(_id=client_id)
    replies = channel.call([pack(("XADD", stream, "*", "n", n)) for n in range(3)], 3)
    assert all(isinstance(reply, bytes) for reply in replies)
    assert client.xlen(stream) == 3
    assert channel.call_one(("CLIENT", "ID")) != client_id


def test_an_input_and_an_output_carry_on_after_their_connections_were_killed(
    redis_url: str, client: redis.Redis, stream: str
) -> None:
    config = {"redis_streams": {"url": redis_url, "stream": stream, "read_from_start": True}}
    output = build_output(config, new_context("test"))
    source = build_input(config, new_context("test"))
    output.connect()
    source.connect()
    try:
        output.send([Message(b"a"), Message(b"b")])
        batch = source.receive(10, 2.0)
        channels = [output._channel, source._reads, source._acks]  # type: ignore[attr-defined]
        for held in channels:  # (Redis is shared: only these)
            client.client_kill_filter(_id=held.call_one(("CLIENT", "ID")))
        output.send([Message(b"c")])
        source.ack(batch)
        later = source.receive(10, 2.0)
        source.ack(later)
        assert [m.payload for m in batch.messages + later.messages] == [b"a", b"b", b"c"]
        assert client.xpending(stream, f"mq-bridge-{stream}")["pending"] == 0
    finally:
        source.close()
        output.close()


def test_a_failed_xadd_fails_only_its_message(
    redis_url: str, client: redis.Redis, stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = build_output({"redis_streams": {"url": redis_url, "stream": stream}}, new_context("t"))
    output.connect()
    try:
        encoder = output._encoder  # type: ignore[attr-defined]
        encode = encoder.encode

        def unknown_command_for_b(messages: list[Message]) -> bytes:
            data = encode(messages)
            if messages[0].payload == b"b":  # "XADD" -> "XXXX": Redis answers an error
                return data.replace(b"XADD", b"XXXX", 1)
            return data

        monkeypatch.setattr(encoder, "encode", unknown_command_for_b)
        monkeypatch.setattr("mq_bridge.endpoints.redis.output._CHUNK", 1)
        with pytest.raises(SendError) as raised:
            output.send([Message(b"a"), Message(b"b"), Message(b"c")])
        assert list(raised.value.failures) == [1]
        entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(stream)  # type: ignore[assignment]
        assert [fields[b"payload"] for _, fields in entries] == [b"a", b"c"]
    finally:
        output.close()
