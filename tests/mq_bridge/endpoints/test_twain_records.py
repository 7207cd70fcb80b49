"""The `twain` endpoint's pure parts: the envelope and the key a message is written under."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq_bridge import Message
from mq_bridge.endpoints.twain.codec import (
    MAGIC,
    decode_record,
    encode_envelope,
    key_function,
    parse_key_type,
)

texts = st.text(max_size=20)
messages = st.builds(
    Message,
    st.binary(max_size=200),
    st.dictionaries(texts, texts, max_size=5),
    st.integers(min_value=0, max_value=(1 << 128) - 1),
)


@given(messages)
def test_an_envelope_keeps_id_metadata_and_payload_exactly(message: Message) -> None:
    record = encode_envelope(message)
    assert record.startswith(MAGIC)
    decoded = decode_record(record, "t", 0, 7)
    assert (decoded.id, decoded.metadata, decoded.payload) == (
        message.id,
        message.metadata,
        message.payload,
    )


def test_an_envelope_without_metadata_costs_24_bytes() -> None:
    assert len(encode_envelope(Message(b"abc"))) == 24 + 3


@pytest.mark.parametrize(
    "value",
    [b"plain bytes", b"MQB1 too short", b"MQB1" + b"\0" * 16 + b"\0\0\0\x09" + b"{not json"],
)
def test_bytes_that_are_not_an_envelope_are_the_payload(value: bytes) -> None:
    message = decode_record(value, "t", 2, 5)
    assert message.payload == value and message.metadata == {}


def test_plain_records_get_an_id_that_is_stable_per_position() -> None:
    first = decode_record("text", "orders", 1, 10)
    assert first.payload == b"text"
    assert decode_record("text", "orders", 1, 10).id == first.id
    assert decode_record("text", "orders", 1, 11).id != first.id
    assert decode_record("text", "other", 1, 10).id != first.id


def test_a_dataclass_record_is_its_json_with_the_type_name() -> None:
    @dataclass
    class Order:
        n: int

    message = decode_record(Order(3), "t", 0, 0)
    assert message.json() == {"n": 3}
    assert message.metadata == {"twain.message_type": "Order"}


def test_a_record_twainmq_could_not_rebuild_is_its_json_with_the_type_name() -> None:
    from twainmq.message import UndecodedMessage

    undecoded = UndecodedMessage("Order", '{"n": 3}', "not registered")
    message = decode_record(undecoded, "t", 0, 0)
    assert message.json() == {"n": 3}
    assert message.get("twain.message_type") == "Order"


@pytest.mark.parametrize(
    ("name", "parsed"), [("u8", (8, 0)), ("u64", (64, 0)), ("char12", (0, 12))]
)
def test_key_types_parse(name: str, parsed: tuple[int, int]) -> None:
    assert parse_key_type(name) == parsed


@pytest.mark.parametrize("name", ["u128", "char0", "char256", "text"])
def test_unknown_key_types_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        parse_key_type(name)


def test_integer_keys_keep_decimal_values_in_range_and_hash_the_rest() -> None:
    key_of = key_function("u16", "customer")
    assert key_of(Message(b"", {"customer": "4711"})) == 4711
    hashed = key_of(Message(b"", {"customer": "70000"}))  # out of u16 range: hashed
    assert isinstance(hashed, int) and 0 <= hashed < 1 << 16
    assert hashed == key_of(Message(b"", {"customer": "70000"}))
    assert key_of(Message(b"", {"customer": "alice"})) == key_of(
        Message(b"x", {"customer": "alice"})
    )


@given(texts, st.sampled_from(["u8", "u16", "u32", "u64"]))
def test_integer_keys_are_always_in_the_key_types_range(text: str, key_type: str) -> None:
    bits = parse_key_type(key_type)[0]
    key = key_function(key_type, "k")(Message(b"", {"k": text}))
    assert isinstance(key, int) and 0 <= key < 1 << bits


@given(texts, st.integers(min_value=1, max_value=255))
def test_text_keys_always_fit_the_char_type(text: str, width: int) -> None:
    key = key_function(f"char{width}", "k")(Message(b"", {"k": text}))
    assert isinstance(key, str) and len(key.encode()) <= width
    if len(text.encode()) <= width:
        assert key == text


def test_without_key_from_or_the_field_the_key_comes_from_the_id() -> None:
    message_id = uuid.uuid4()
    message = Message(b"", {"other": "x"}, id=message_id)
    assert key_function("u64", None)(message) == message_id.int & ((1 << 64) - 1)
    assert key_function("u64", "customer")(message) == message_id.int & ((1 << 64) - 1)
    char_key = key_function("char8", None)(message)
    assert isinstance(char_key, str) and len(char_key) == 8
    assert key_function("char36", None)(message) == str(message_id)
