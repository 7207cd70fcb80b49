"""Property tests of the pure partition assignor."""

import doctest

from hypothesis import given
from hypothesis import strategies as st

from twainmq.groups import assignor
from twainmq.groups.assignor import assign_partitions

member_names = st.lists(st.text("abcdefgh", min_size=1, max_size=3), max_size=8, unique=True)
partition_ids = st.lists(st.integers(0, 40), max_size=40, unique=True)
previous_maps = st.dictionaries(
    st.text("abcdefghij", min_size=1, max_size=3), st.lists(st.integers(0, 45), max_size=12)
)


@given(partition_ids, member_names, previous_maps)
def test_every_partition_has_exactly_one_owner(partitions, members, previous):
    result = assign_partitions(partitions, members, previous)
    owned = [p for ps in result.values() for p in ps]
    if members:
        assert sorted(owned) == sorted(partitions)
        assert set(result) == set(members)
    else:
        assert result == {}


@given(partition_ids, member_names, previous_maps)
def test_sizes_differ_by_at_most_one(partitions, members, previous):
    sizes = [len(ps) for ps in assign_partitions(partitions, members, previous).values()]
    if sizes:
        assert max(sizes) - min(sizes) <= 1


@given(partition_ids, member_names, previous_maps)
def test_members_keep_what_they_had_up_to_their_share(partitions, members, previous):
    result = assign_partitions(partitions, members, previous)
    claimed: set[int] = set()
    for name in sorted(members):
        still_valid = {p for p in previous.get(name, ()) if p in partitions} - claimed
        claimed |= still_valid
        kept = set(result[name]) & still_valid
        assert len(kept) == min(len(result[name]), len(still_valid))


@given(partition_ids, member_names)
def test_a_balanced_assignment_is_stable(partitions, members):
    first = assign_partitions(partitions, members)
    assert assign_partitions(partitions, members, first) == first


@given(partition_ids, member_names, previous_maps)
def test_input_order_does_not_matter(partitions, members, previous):
    forward = assign_partitions(partitions, members, previous)
    backward = assign_partitions(reversed(partitions), list(reversed(members)), previous)
    assert forward == backward


def test_one_joiner_takes_only_the_surplus():
    before = {"a": [0, 1, 2, 3]}
    after = assign_partitions(range(4), ["a", "b"], before)
    assert after == {"a": [0, 1], "b": [2, 3]}


def test_docstring_example_holds():
    failures, tried = doctest.testmod(assignor)
    assert tried >= 2
    assert failures == 0
