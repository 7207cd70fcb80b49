"""The record format: round trips, torn tails and corruption, property-tested."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twainmq.encoding import (
    HEADER_SIZE,
    TAG_BYTES,
    TAG_DATACLASS,
    TAG_TEXT,
    CorruptRecord,
    decode_messages,
    encode_record,
    frame,
    frame_text,
    frame_with_prefix,
    read_records,
    record_boundaries,
    record_prefix,
    record_size,
    text_head,
)

records = st.lists(
    st.tuples(
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.sampled_from([TAG_BYTES, TAG_TEXT]),
        st.binary(max_size=40),
        st.binary(max_size=300),
    ),
    max_size=20,
)


def encode_all(items: list[tuple[int, int, bytes, bytes]]) -> bytes:
    return b"".join(encode_record(*item) for item in items)


@given(records)
def test_records_round_trip(items: list[tuple[int, int, bytes, bytes]]) -> None:
    buf = encode_all(items)
    decoded, stop = read_records(buf, 0, len(buf))
    assert decoded == items
    assert stop == len(buf)
    assert len(buf) == sum(record_size(len(k), len(p)) for _, _, k, p in items)


@given(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([TAG_BYTES, TAG_TEXT, TAG_DATACLASS]),
    st.binary(max_size=255),
    st.lists(st.binary(max_size=300), min_size=1, max_size=5),
)
def test_every_framing_path_builds_the_same_records(
    timestamp_us: int, tag: int, key: bytes, payloads: list[bytes]
) -> None:
    one_by_one = [frame(key, timestamp_us, tag, payload) for payload in payloads]
    prefix = record_prefix(key, timestamp_us, tag)  # a batch: one prefix for every record
    assert [frame_with_prefix(prefix, payload) for payload in payloads] == one_by_one
    if tag == TAG_TEXT:
        head = text_head(key)
        assert [frame_text(head, timestamp_us, payload) for payload in payloads] == one_by_one
    buf = b"".join(one_by_one)
    decoded, stop = read_records(buf, 0, len(buf))
    assert decoded == [(timestamp_us, tag, key, payload) for payload in payloads]
    assert stop == len(buf)


@given(records, st.data())
def test_a_cut_buffer_yields_only_whole_records(items, data) -> None:  # type: ignore[no-untyped-def]
    buf = encode_all(items)
    cut = data.draw(st.integers(min_value=0, max_value=len(buf)))
    decoded, stop = read_records(buf, 0, cut)
    assert decoded == items[: len(decoded)]
    assert stop <= cut
    assert len(encode_all(items[: len(decoded)])) == stop


@given(records.filter(bool), st.data())
def test_a_flipped_byte_never_yields_wrong_data(items, data) -> None:  # type: ignore[no-untyped-def]
    buf = bytearray(encode_all(items))
    where = data.draw(st.integers(min_value=0, max_value=len(buf) - 1))
    buf[where] ^= data.draw(st.integers(min_value=1, max_value=255))
    try:
        decoded, _ = read_records(bytes(buf), 0, len(buf))
    except CorruptRecord as exc:
        assert 0 <= exc.position <= where
        return
    # Without an error, every record returned is one that was written, in order.
    assert decoded == items[: len(decoded)]
    assert len(decoded) < len(items) or where >= len(encode_all(items))


@given(st.lists(st.tuples(st.integers(0, 65535), st.text(max_size=50)), max_size=30))
def test_decode_messages_gives_offsets_keys_and_text(pairs) -> None:  # type: ignore[no-untyped-def]
    buf = b"".join(
        encode_record(1_000 + i, TAG_TEXT, k.to_bytes(2, "little"), t.encode())
        for i, (k, t) in enumerate(pairs)
    )
    messages, stop, error = decode_messages(buf, len(buf), 7, 3, 2, lambda raw: raw)
    assert stop == len(buf) and error is None
    assert [(m.offset, m.partition, m.key, m.message) for m in messages] == [
        (7 + i, 3, k, t) for i, (k, t) in enumerate(pairs)
    ]
    assert [m.timestamp_us for m in messages] == [1_000 + i for i in range(len(pairs))]


def test_record_layout_matches_the_drawing() -> None:
    record = encode_record(5, TAG_TEXT, b"\x01\x00", b"hi")
    assert len(record) == HEADER_SIZE + 2 + 2
    assert int.from_bytes(record[0:4], "little") == len(record) - 4
    assert int.from_bytes(record[8:16], "little") == 5
    assert record[16] == TAG_TEXT and record[17] == 2
    assert record[18:20] == b"\x01\x00" and record[20:] == b"hi"
    assert int.from_bytes(record[4:8], "little") == zlib.crc32(record[8:])


def test_crc_mismatch_names_the_position() -> None:
    good = encode_record(1, TAG_BYTES, b"", b"abc")
    bad = bytearray(encode_record(2, TAG_BYTES, b"", b"xyz"))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecord) as info:
        read_records(good + bytes(bad), 0, len(good) + len(bad))
    assert info.value.position == len(good)


def test_record_boundaries_stop_at_the_first_bad_record() -> None:
    first = encode_record(1, TAG_BYTES, b"", b"a")
    second = bytearray(encode_record(2, TAG_BYTES, b"", b"b"))
    second[9] ^= 1
    found = record_boundaries(first + bytes(second) + first, 0, 3 * len(first))
    assert found == [(0, 1)]


def test_garbage_length_is_corruption_not_a_short_read() -> None:
    garbage = b"\xff\xff\xff\xff" + b"\x00" * 30
    with pytest.raises(CorruptRecord):
        read_records(garbage, 0, len(garbage))


def test_decode_messages_returns_good_messages_before_a_bad_one() -> None:
    good = encode_record(1, TAG_TEXT, b"ab", b"fine")
    bad = bytearray(encode_record(2, TAG_TEXT, b"cd", b"broken"))
    bad[-1] ^= 1
    buf = good + bytes(bad) + good
    messages, stop, error = decode_messages(buf, len(buf), 0, 0, 0, lambda raw: raw)
    assert [(m.key, m.message) for m in messages] == [("ab", "fine")]
    assert stop == len(good) and error is not None and error.position == len(good)


def test_a_key_of_the_wrong_width_is_corruption() -> None:
    buf = encode_record(1, TAG_TEXT, b"abc", b"x")
    messages, _, error = decode_messages(buf, len(buf), 0, 0, 2, lambda raw: raw)
    assert messages == [] and error is not None and "3 bytes" in error.reason
