"""Big groups settle in few generations: a rebalance admits every member waiting to join,
and a joiner already admitted does not queue for the group lock (bench/twainmq_settle.py
has the timings; no timing here)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tests.helpers import wait_until
from tests.twainmq.groups.conftest import sync
from twainmq.groups import GroupMember, GroupPaths
from twainmq.groups.locking import exclusive_lock
from twainmq.groups.membership import MemberFile


def test_a_rebalance_admits_every_member_waiting_to_join(tmp_path: Path) -> None:
    paths = GroupPaths.of(tmp_path, "t", "g")
    paths.create()
    waiting = MemberFile(paths, "123-waiting")  # a joiner queued for the group lock
    stale = paths.member("456-dead")
    stale.write_text("{}")  # nobody holds it: not a member, and not deleted here either
    first = GroupMember(paths, 8)
    try:
        assert set(first.state.members) == {first.member_id, "123-waiting"}
        assert first.state.members["123-waiting"]["pid"] == os.getpid()
        assert len(first.state.assignment["123-waiting"]) == 4  # its share at once
        assert stale.exists()
    finally:
        first.leave()
        waiting.release()


def test_an_admitted_joiner_joins_without_the_group_lock(tmp_path: Path) -> None:
    paths = GroupPaths.of(tmp_path, "t", "g")
    first = GroupMember(paths, 4)
    joined: list[GroupMember] = []
    try:
        with exclusive_lock(paths.lock) as locked:  # as a long rebalance of someone else
            assert locked
            joiner = threading.Thread(target=lambda: joined.append(GroupMember(paths, 4)))
            joiner.start()
            assert wait_until(lambda: len(os.listdir(paths.members)) == 2)
            assert not joined  # it waits for the lock, or to be admitted
            # Admit it as the lock holder's rebalance would, without letting go of the lock.
            from twainmq.groups.assignor import assign_partitions
            from twainmq.groups.coordinator import waiting_joiners
            from twainmq.groups.state import GroupState, load_state, save_state

            state = load_state(paths)
            assert state is not None
            members = {**state.members, **waiting_joiners(paths, state.members)}
            assignment = assign_partitions(range(4), members, state.assignment)
            save_state(paths, GroupState(state.generation + 1, 4, members, assignment))
            joiner.join(timeout=10)
            assert joined and joined[0].generation == state.generation + 1
        sync(first)
        second = joined[0]
        assert wait_until(lambda: (sync(first), sync(second)) and len(second.owned()) == 2)
        assert sorted([*first.owned(), *second.owned()]) == [0, 1, 2, 3]
    finally:
        first.leave()
        for member in joined:
            member.leave()
