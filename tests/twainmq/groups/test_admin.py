"""Describing groups from outside and resetting inactive groups' offsets."""

import pytest

from tests.twainmq.groups.conftest import sync
from twainmq.groups import (
    GroupActiveError,
    GroupMember,
    GroupNotFoundError,
    GroupPaths,
    list_groups,
)
from twainmq.groups.admin import describe_group, reset_offsets
from twainmq.groups.membership import MemberStatus

ENDS = {0: 10, 1: 20, 2: 0, 3: 5}


def paths_of(tmp_path, group="workers"):
    return GroupPaths.of(tmp_path, "events", group)


def test_describe_shows_members_owners_commits_and_lag(tmp_path):
    member = GroupMember(paths_of(tmp_path), 4)
    sync(member)
    member.commit({0: 4, 1: 20})
    described = describe_group(paths_of(tmp_path), ENDS)
    assert [m.member_id for m in described.members] == [member.member_id]
    assert described.members[0].status is MemberStatus.ALIVE
    assert described.members[0].partitions == [0, 1, 2, 3]
    assert described.owners == dict.fromkeys(range(4), member.member_id)
    assert {p: lag.lag for p, lag in described.partitions.items()} == {0: 6, 1: 0, 2: 0, 3: 5}
    assert described.partitions[0].committed == 4
    assert described.partitions[3].committed is None
    assert described.active
    member.leave()
    assert not describe_group(paths_of(tmp_path), ENDS).active


def test_groups_are_listed_by_topic_and_name(tmp_path):
    for name in ("b", "a"):
        GroupMember(paths_of(tmp_path, name), 1).leave()
    assert [(g.topic, g.group) for g in list_groups(tmp_path)] == [("events", "a"), ("events", "b")]
    assert list_groups(tmp_path / "nothing-here") == []


def test_reset_is_refused_while_a_member_lives(tmp_path):
    member = GroupMember(paths_of(tmp_path), 4)
    with pytest.raises(GroupActiveError, match=member.member_id):
        reset_offsets(paths_of(tmp_path), {0: 0})
    member.leave()


def test_reset_of_an_inactive_group_sets_commits(tmp_path):
    member = GroupMember(paths_of(tmp_path), 4)
    sync(member)
    member.commit({0: 7, 1: 7})
    member.leave()
    reset_offsets(paths_of(tmp_path), {0: 2, 2: 3})
    assert describe_group(paths_of(tmp_path), ENDS).partitions[0].committed == 2
    assert GroupMember(paths_of(tmp_path), 4).committed() == {0: 2, 1: 7, 2: 3}


def test_unknown_groups_are_named(tmp_path):
    with pytest.raises(GroupNotFoundError, match="'nope' on topic 'events'"):
        describe_group(paths_of(tmp_path, "nope"), ENDS)
    with pytest.raises(GroupNotFoundError):
        reset_offsets(paths_of(tmp_path, "nope"), {0: 1})
