"""Messages to and from broker headers: the id header, decoding, forged ``mqb.src.*`` keys."""

from __future__ import annotations

import logging
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq_bridge.endpoints.kit.source_metadata import with_source
from mq_bridge.endpoints.kit.wire import (
    MESSAGE_ID_HEADER,
    headers_for,
    message_from_wire,
    position_id,
)
from mq_bridge.message import Message

ID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
WIRE_ID = ID.replace("-", "")  # mq-bridge's header form: 32 hex digits


def test_the_id_header_name_is_mq_bridges() -> None:
    assert MESSAGE_ID_HEADER == "mq_bridge.message_id"


def test_headers_carry_metadata_and_the_id_as_mq_bridge_writes_it() -> None:
    message = Message(b"{}", {"kind": "order"}, id=ID.upper())
    assert headers_for(message) == {"kind": "order", MESSAGE_ID_HEADER: WIRE_ID}
    assert message_from_wire(b"", {MESSAGE_ID_HEADER: WIRE_ID}).id == ID


def test_headers_strip_source_keys_and_leave_the_message_alone() -> None:
    metadata = with_source({"kind": "order"}, {"kafka_topic": "t", "kafka_offset": 3}, True)
    message = Message(b"x", metadata, id=ID)
    assert headers_for(message) == {"kind": "order", MESSAGE_ID_HEADER: WIRE_ID}
    assert message.get("mqb.src.kafka_topic") == "t"
    headers_for(message)["extra"] = "changed"
    assert "extra" not in message.metadata


def test_a_round_trip_keeps_payload_metadata_and_id() -> None:
    sent = Message(b"\x00payload\xff", {"kind": "order", "trace": "abc"})
    received = message_from_wire(sent.payload, headers_for(sent))
    assert received == sent
    assert received.id == sent.id and received.metadata == sent.metadata


def test_a_round_trip_through_bytes_headers() -> None:
    sent = Message(b"p", {"kind": "order", "name": "Zoë"})
    wire = {key: value.encode() for key, value in headers_for(sent).items()}
    assert message_from_wire(sent.payload, wire) == sent


def test_forged_source_headers_are_dropped() -> None:
    headers: dict[str, str | bytes] = {
        "kind": "order",
        "mqb.src.kafka_offset": "0",
        "mqb.src.nats_stream_sequence": b"1",
        MESSAGE_ID_HEADER: ID,
    }
    message = message_from_wire(b"p", headers)
    assert message.metadata == {"kind": "order"}
    assert message.id == ID


def test_undecodable_headers_are_skipped_with_a_debug_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="mq_bridge.endpoints"):
        message = message_from_wire(b"p", {"ok": b"fine", "binary": b"\xff\xfe"})
    assert message.metadata == {"ok": "fine"}
    assert "binary" in caplog.text


def test_the_id_comes_from_the_header_then_the_fallback_then_a_new_one() -> None:
    fallback = position_id("kafka", "orders", 0, 42)
    assert message_from_wire(b"p", {MESSAGE_ID_HEADER: ID}, fallback).id == ID
    assert message_from_wire(b"p", {}, fallback).id_int == fallback
    assert message_from_wire(b"p", None, fallback).id_int == fallback
    first, second = message_from_wire(b"p", None), message_from_wire(b"p", None)
    assert first.id != second.id
    assert uuid.UUID(first.id).version == 7


@pytest.mark.parametrize("text", ["not-an-id", "", "-1", str(1 << 128), "0xZZ"])
def test_an_invalid_id_header_falls_back(text: str) -> None:
    message = message_from_wire(b"p", {MESSAGE_ID_HEADER: text}, fallback_id=7)
    assert message.id_int == 7
    assert MESSAGE_ID_HEADER not in message.metadata


@pytest.mark.parametrize(
    ("text", "value"),
    [(ID, uuid.UUID(ID).int), (" 12345 ", 12345), ("0xff", 255), (ID.replace("-", ""), None)],
)
def test_id_headers_as_uuids_or_128_bit_integers(text: str, value: int | None) -> None:
    expected = uuid.UUID(ID).int if value is None else value
    assert message_from_wire(b"p", {MESSAGE_ID_HEADER: text}).id_int == expected


def test_payloads_that_are_not_bytes_are_copied_to_bytes() -> None:
    message = message_from_wire(memoryview(b"abc"), None)  # type: ignore[arg-type]
    assert type(message.payload) is bytes and message.payload == b"abc"


def test_no_metadata_makes_an_empty_mapping() -> None:
    assert message_from_wire(b"p", {MESSAGE_ID_HEADER: ID}).metadata == {}


def test_position_ids_are_stable_and_distinct() -> None:
    assert position_id("kafka", "orders", 0, 42) == position_id("kafka", "orders", 0, 42)
    ids = {
        position_id("kafka", "orders", 0, 42),
        position_id("kafka", "orders", 0, 43),
        position_id("kafka", "orders", 1, 42),
        position_id("nats", "orders", 0, 42),
        position_id("kafka", "orders.0", 42),
        position_id("kafka", "orders", "0.42"),
    }
    assert len(ids) == 6
    assert all(0 <= value < 1 << 128 for value in ids)
    # Pinned: ids derived from positions must never change between versions.
    pinned = uuid.UUID(int=position_id("kafka", "orders", 0, 42))
    assert str(pinned) == "b1e98507-a131-56ff-9743-6e6128e972bc" and pinned.version == 5


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_json_uuid_is_written_as_the_canonical_uuid_text(value: int) -> None:
    import orjson

    from mq_bridge.endpoints.kit import wire

    expected = f'"{uuid.UUID(int=value)}"'.encode()
    assert orjson.dumps(wire.json_uuid(value)) == expected
    assert orjson.dumps(wire._uuid_text(value)) == expected  # the fallback's form
    assert wire.json_uuid is wire._uuid_of  # this Python allows the fast form
