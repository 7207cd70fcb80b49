"""The consumer's interleaving of partition chunks: one message of each chunk in turn."""

from __future__ import annotations

from itertools import zip_longest

from hypothesis import given
from hypothesis import strategies as st

from twainmq.consumer import interleave


@given(st.lists(st.lists(st.integers(), min_size=1, max_size=40), max_size=8))
def test_interleave_is_round_robin_over_the_chunks(chunks: list[list[int]]) -> None:
    expected = [item for row in zip_longest(*chunks) for item in row if item is not None]
    assert interleave(chunks) == expected  # type: ignore[arg-type]
