"""The `file` endpoint's pure record formats: round trips, framing, tolerant reading."""

from __future__ import annotations

import gc
import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq_bridge.endpoints.file.codec import (
    batch_encoder,
    decode_records,
    encode_record,
    encode_records,
)
from mq_bridge.message import Message

ids = st.integers(min_value=0, max_value=(1 << 128) - 1)
metadata = st.dictionaries(st.text(max_size=8), st.text(max_size=16), max_size=4)
messages = st.builds(Message, st.binary(max_size=64), metadata, ids)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


def split_records(data: bytes, delimiter: bytes) -> tuple[list[bytes], list[int]]:
    """Records and their start offsets, as the reader produces them."""
    records = data.split(delimiter)
    assert records.pop() == b"", "every record ends with the delimiter"
    offsets, position = [], 0
    for record in records:
        offsets.append(position)
        position += len(record) + len(delimiter)
    return records, offsets


def round_trip(batch: list[Message], fmt: str, delimiter: bytes = b"\n") -> list[Message]:
    data, failures = encode_records(batch, fmt, delimiter)
    assert failures == {}
    records, offsets = split_records(data, delimiter)
    result = decode_records(records, offsets, fmt, id_base=0)
    assert result.errors == []
    return result.messages


@pytest.mark.parametrize("delimiter", [b"\n", b"\x00", b"\x1e\n"])
@pytest.mark.parametrize("fmt", ["normal", "text"])
@given(batch=st.lists(messages, max_size=8))
def test_envelope_formats_round_trip_every_message_exactly(
    fmt: str, delimiter: bytes, batch: list[Message]
) -> None:
    assert round_trip(batch, fmt, delimiter) == batch
    fast = batch_encoder(fmt, delimiter)
    if fast is not None:  # the batched encoder writes exactly what the general one does
        assert fast(batch) == b"".join(encode_record(m, fmt, delimiter) for m in batch)


@given(values=st.lists(json_values, max_size=6), meta=metadata, id_value=ids)
def test_json_format_round_trips_compact_json_payloads(
    values: list[object], meta: dict[str, str], id_value: int
) -> None:
    batch = [Message.from_json(value, meta, id_value) for value in values]
    decoded = round_trip(batch, "json")
    assert [m.json() for m in decoded] == values
    assert [(m.id, m.metadata) for m in decoded] == [(m.id, m.metadata) for m in batch]


@given(payload=st.binary(max_size=32))
def test_json_format_keeps_non_json_payloads_exact(payload: bytes) -> None:
    message = Message(payload, {"k": "v"})
    (decoded,) = round_trip([message], "json")
    try:
        meaning = orjson.loads(payload)  # strict JSON, as the encoder judges it
    except ValueError:  # not JSON: kept byte for byte
        assert decoded == message
    else:  # JSON such as b"\t0": same value (the documented whitespace caveat)
        assert decoded.json() == meaning and decoded.id == message.id


@given(payloads=st.lists(st.binary(max_size=32).filter(lambda p: b"\x00" not in p), max_size=8))
def test_raw_format_round_trips_payloads_with_ids_from_offsets(payloads: list[bytes]) -> None:
    batch = [Message(payload) for payload in payloads]
    data, _ = encode_records(batch, "raw", b"\x00")
    records, offsets = split_records(data, b"\x00")
    decoded = decode_records(records, offsets, "raw", id_base=7 << 64).messages
    assert [m.payload for m in decoded] == payloads
    assert [m.id_int for m in decoded] == [(7 << 64) | offset for offset in offsets]


def test_a_record_containing_the_delimiter_fails_alone() -> None:
    good, bad = Message(b"one"), Message(b"two\nlines")
    data, failures = encode_records([good, bad, good], "raw", b"\n")
    assert data == b"one\none\n"
    assert list(failures) == [1]
    assert "delimiter" in str(failures[1])
    with pytest.raises(ValueError, match="delimiter"):
        encode_record(bad, "raw", b"\n")


def test_envelopes_never_contain_a_newline_so_any_payload_frames() -> None:
    message = Message(b"two\nlines\r\n", {"a\nb": "c\n"})
    record = encode_record(message, "normal", b"\n")
    assert record.count(b"\n") == 1 and record.endswith(b"\n")


def test_multi_byte_delimiters_frame_records() -> None:
    batch = [Message(b"a|b"), Message(b"c")]
    assert round_trip(batch, "normal", b"||") == batch


def test_reads_envelopes_written_by_mq_bridge_peers() -> None:
    """Lines as mq-bridge 1.2.0 (text / base64 payload) and 0.3.2 (byte list) write them."""
    uid = "01a228b9-031b-7ac9-9ddf-e64a78bac5f8"
    records = [
        json.dumps({"message_id": uid, "payload": '{"n":1}', "metadata": {"k": "v"}}).encode(),
        json.dumps({"message_id": uid, "payload_base64": "aGVsbG//"}).encode(),
        json.dumps({"message_id": uid, "payload": [104, 105]}).encode(),
    ]
    decoded = decode_records(records, [0, 1, 2], "normal", 0).messages
    assert [m.payload for m in decoded] == [b'{"n":1}', b"hello\xff", b"hi"]
    assert decoded[0].metadata == {"k": "v"} and decoded[0].id == uid


def test_undecodable_records_are_reported_with_their_offsets_and_others_kept() -> None:
    good = encode_record(Message(b"ok"), "normal", b"\n")[:-1]
    records = [good, b'{"message_id": "x", "payl', b"[1, 2]", b'{"payload": "no id"}', good]
    result = decode_records(records, [0, 10, 20, 30, 40], "normal", 0)
    assert [m.payload for m in result.messages] == [b"ok", b"ok"]
    assert [offset for offset, _ in result.errors] == [10, 20, 30]
    assert all("envelope" in reason for _, reason in result.errors)


def test_metadata_must_be_strings() -> None:
    record = b'{"message_id": "0x1", "payload": "p", "metadata": {"n": 1}}'
    result = decode_records([record], [0], "normal", 0)
    assert result.messages == [] and "metadata" in result.errors[0][1]


def test_metadata_with_lone_surrogates_round_trips() -> None:
    message = Message(b"p", {"k": "\ud800"})
    assert round_trip([message], "normal") == [message]


def test_blank_lines_between_envelopes_are_not_records() -> None:
    good = encode_record(Message(b"ok"), "normal", b"\n")[:-1]
    result = decode_records([b"", good, b"", good], [0, 1, 40, 41], "normal", 0)
    assert [m.payload for m in result.messages] == [b"ok", b"ok"] and result.errors == []


def test_plain_json_lines_read_as_envelopes_get_a_hint() -> None:
    result = decode_records([b'{"order_id": 1}'], [0], "normal", 0)
    assert "format: raw" in result.errors[0][1]


def test_batched_envelopes_keep_boundaries_even_when_payloads_look_like_them() -> None:
    tricky = [
        Message(b'},{"message_id":"x"}', {"message_id": "},{"}),
        Message(b"\xff\xfe binary"),
        Message(b"", {"k": "\ud800"}),
    ]
    assert round_trip(tricky * 2, "normal") == tricky * 2


def test_equal_metadata_is_shared_and_a_bad_value_after_a_good_one_is_still_caught() -> None:
    uid = "01a228b9-031b-7ac9-9ddf-e64a78bac5f8"
    good = json.dumps({"message_id": uid, "payload": "p", "metadata": {"k": "v"}}).encode()
    bad = json.dumps({"message_id": uid, "payload": "p", "metadata": {"k": 1}}).encode()
    result = decode_records([good, good, bad, good], [0, 10, 20, 30], "normal", 0)
    assert [offset for offset, _ in result.errors] == [20]
    assert [m.metadata for m in result.messages] == [{"k": "v"}] * 3
    first, second = decode_records([good, good], [0, 10], "normal", 0).messages
    assert first._metadata is second._metadata  # one dict for equal metadata


@pytest.mark.parametrize("enabled", [True, False])
def test_decoding_leaves_the_garbage_collector_as_it_found_it(enabled: bool) -> None:
    good = encode_record(Message(b"ok"), "normal", b"\n")[:-1]
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        decode_records([good, good], [0, 40], "normal", 0)
        decode_records([good, b"not json"], [0, 40], "normal", 0)  # the fallback path
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
