"""Key types and the SplitMix64 partitioner."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twainmq import InvalidKeyError, InvalidKeyTypeError
from twainmq.keys import default_partitioner, parse_key_type, splitmix64


def test_splitmix64_matches_the_reference_generator() -> None:
    # First outputs of the reference SplitMix64 generator seeded with 0 (Vigna's splitmix64.c).
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    assert splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4


@pytest.mark.parametrize(
    ("name", "width", "text"),
    [
        ("u8", 1, False),
        ("u16", 2, False),
        ("u32", 4, False),
        ("u64", 8, False),
        ("char10", 10, True),
    ],
)
def test_key_types_parse(name: str, width: int, text: bool) -> None:
    key_type = parse_key_type(name)
    assert (key_type.width, key_type.is_text) == (width, text)


@pytest.mark.parametrize("name", ["u7", "i16", "char0", "char256", "char", "U16", "", None, 16])
def test_bad_key_types_are_named(name: object) -> None:
    with pytest.raises(InvalidKeyTypeError, match=repr(name).replace("(", r"\(")):
        parse_key_type(name)


@given(st.integers(0, 2**64 - 1))
def test_u64_keys_round_trip(key: int) -> None:
    key_type = parse_key_type("u64")
    assert key_type.decode(key_type.encode(key)) == key


@given(st.text(max_size=8).filter(lambda t: len(t.encode()) <= 32))
def test_text_keys_round_trip(key: str) -> None:
    key_type = parse_key_type("char32")
    assert key_type.decode(key_type.encode(key)) == key


@pytest.mark.parametrize(
    ("key_type", "key", "fragment"),
    [
        ("u8", 256, "256 is out of range"),
        ("u16", -1, "-1 is out of range"),
        ("u16", "7", "must be an int"),
        ("u16", True, "must be an int"),
        ("u16", 1.0, "must be an int"),
        ("char3", "abcd", "'abcd' is 4 bytes"),
        ("char3", "é12", "'é12' is 4 bytes"),
        ("char3", 5, "must be a str"),
    ],
)
def test_bad_keys_are_named(key_type: str, key: object, fragment: str) -> None:
    with pytest.raises(InvalidKeyError, match=fragment):
        parse_key_type(key_type).encode(key)


def test_same_key_same_partition_and_spread_is_even() -> None:
    assert default_partitioner(12, 4) == default_partitioner(12, 4)
    assert default_partitioner("abc", 7) == default_partitioner("abc", 7)
    counts = Counter(default_partitioner(k, 4) for k in range(4000))
    assert set(counts) == {0, 1, 2, 3}
    assert min(counts.values()) > 800
    text_counts = Counter(default_partitioner(f"user-{k}", 4) for k in range(4000))
    assert min(text_counts.values()) > 800
