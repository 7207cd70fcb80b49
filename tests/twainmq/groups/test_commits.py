"""Commits carry the owner's epoch: the latest epoch counts; late writers are fenced."""

import pytest

from twainmq.groups import CommitFencedError, GroupPaths
from twainmq.groups.commit_log import read_log
from twainmq.groups.commits import adopt_commit, commit_fenced, read_commits, write_commits


@pytest.fixture
def paths(tmp_path):
    group = GroupPaths.of(tmp_path, "events", "workers")
    group.create()
    return group


def test_commits_round_trip_and_only_the_owner_may_write(paths):
    commit_fenced(paths, {0: 5, 1: 7}, held_epochs={0: 0, 1: 0}, current_epochs={})
    assert read_commits(paths) == {0: 5, 1: 7}
    with pytest.raises(CommitFencedError) as refused:
        commit_fenced(paths, {0: 6, 2: 1}, held_epochs={0: 0}, current_epochs={})
    assert refused.value.partitions == [2]
    assert read_commits(paths) == {0: 5, 1: 7}


def test_a_commit_from_an_older_epoch_is_refused_and_ignored(paths):
    commit_fenced(paths, {3: 10}, held_epochs={3: 0}, current_epochs={3: 0})
    adopt_commit(paths, 3, epoch=1)  # a new owner took partition 3 in epoch 1
    assert read_commits(paths) == {3: 10}
    # the expelled owner, unaware (its view of the state is old), commits late
    with pytest.raises(CommitFencedError, match=r"\[3\]"):
        commit_fenced(paths, {3: 99}, held_epochs={3: 0}, current_epochs={3: 0})
    assert read_commits(paths) == {3: 10}
    commit_fenced(paths, {3: 12}, held_epochs={3: 1}, current_epochs={3: 1})
    assert read_commits(paths) == {3: 12}


def test_adopting_without_any_commit_keeps_the_partition_uncommitted(paths):
    adopt_commit(paths, 0, epoch=2)
    assert read_commits(paths) == {}
    with pytest.raises(CommitFencedError):  # a late writer of epoch 1 cannot sneak one in
        commit_fenced(paths, {0: 4}, held_epochs={0: 1}, current_epochs={0: 1})
    assert read_commits(paths) == {}


def test_admin_writes_go_to_the_latest_epoch(paths):
    adopt_commit(paths, 1, epoch=3)
    write_commits(paths, {1: 8, 2: 9})
    assert read_commits(paths) == {1: 8, 2: 9}
    assert read_log(paths) == {1: (3, 8), 2: (0, 9)}
