"""The file-based group protocol between members, without the storage engine."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.twainmq.groups.conftest import sync
from twainmq.groups import (
    CommitFencedError,
    GroupMember,
    GroupPaths,
    GroupSettings,
    InvalidGroupNameError,
    coordinator,
    ownership,
)
from twainmq.groups.coordinator import MembershipChange, rebalance
from twainmq.groups.state import GroupState, load_state

FAST = GroupSettings(session_timeout=10.0)
MEMBER_SCRIPT = Path(__file__).with_name("member_process.py")


def join(tmp_path: Path, partitions: int = 4, settings: GroupSettings = FAST) -> GroupMember:
    return GroupMember(GroupPaths.of(tmp_path, "events", "workers"), partitions, settings)


def settle(*members: GroupMember, timeout: float = 10.0) -> None:
    """Sync every member until their holdings equal their targets."""

    def settled() -> bool:
        for member in members:
            sync(member)
        latest = load_state(members[0].paths)
        return all(
            not m.expelled
            and m.generation == latest.generation
            and sorted(m.owned()) == sorted(m.target())
            for m in members
        )

    assert wait_until(settled, timeout)


def test_a_lone_member_owns_every_partition(tmp_path):
    member = join(tmp_path)
    settle(member)
    assert sorted(member.owned()) == [0, 1, 2, 3]
    member.leave()


def test_two_members_split_the_partitions_disjointly(tmp_path):
    first = join(tmp_path)
    settle(first)
    second = join(tmp_path)
    settle(first, second)
    assert set(first.owned()).isdisjoint(second.owned())
    assert sorted([*first.owned(), *second.owned()]) == [0, 1, 2, 3]
    assert len(first.owned()) == len(second.owned()) == 2
    first.leave()
    second.leave()


def test_a_newcomer_waits_until_the_old_owner_lets_go(tmp_path):
    first = join(tmp_path)
    settle(first)
    second = join(tmp_path)
    for _ in range(3):
        second.refresh()
        second.acquire_pending()
    assert second.owned() == {}, "took partitions still locked by their previous owner"
    settle(first, second)
    assert len(second.owned()) == 2


def test_leaving_hands_everything_to_the_others_at_once(tmp_path):
    first, second = join(tmp_path), join(tmp_path)
    settle(first, second)
    second.leave()
    settle(first, timeout=1.0)
    assert sorted(first.owned()) == [0, 1, 2, 3]


def test_members_in_threads_never_share_a_partition(tmp_path):
    stop = threading.Event()
    violations: list[str] = []
    owners: dict[int, set[str]] = {p: set() for p in range(6)}
    guard = threading.Lock()
    handovers = [0]

    def track_sync(member: GroupMember) -> None:
        # Record a release before it happens and an acquisition after it happened,
        # so an overlap seen here is an overlap of real lock ownership.
        if not member.refresh():
            return
        revoked = member.revocations()
        with guard:
            for p in revoked:
                owners[p].discard(member.member_id)
        member.release(revoked)
        taken = member.acquire_pending()
        with guard:
            handovers[0] += len(taken)
            for p in taken:
                owners[p].add(member.member_id)
                if len(owners[p]) > 1:
                    violations.append(f"partition {p}: {sorted(owners[p])}")

    def leave(member: GroupMember) -> None:
        with guard:
            for p in member.owned():
                owners[p].discard(member.member_id)
        member.leave()

    def run_member() -> None:
        paths = GroupPaths.of(tmp_path, "events", "workers")
        member = GroupMember(paths, 6, FAST)
        rejoin_at = time.monotonic() + 0.3
        while not stop.is_set():
            track_sync(member)
            if time.monotonic() > rejoin_at:  # leave and rejoin, to churn the group
                leave(member)
                member = GroupMember(paths, 6, FAST)
                rejoin_at = time.monotonic() + 0.3
            time.sleep(0.0005)
        leave(member)

    threads = [threading.Thread(target=run_member) for _ in range(4)]
    for thread in threads:
        thread.start()
    # Churn for 2 s, longer on a loaded machine until enough handovers happened (bounded).
    time.sleep(2.0)
    deadline = time.monotonic() + 30
    while handovers[0] <= 10 and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    assert violations == []
    assert handovers[0] > 10, "the group barely churned; the test proved little"
    assert all(not owned for owned in owners.values())


def test_a_killed_member_is_detected_and_its_partitions_move(tmp_path):
    survivor = join(tmp_path)
    settle(survivor)
    child = subprocess.Popen(
        [sys.executable, str(MEMBER_SCRIPT), str(tmp_path), "events", "workers", "4"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: (sync(survivor), len(survivor.owned()) == 2)[1])
        assert child.stdout is not None
        for line in child.stdout:  # wait until the child owns its two partitions
            if line.split()[0] == "owned" and len(line.split()) == 3:
                break
        else:
            raise AssertionError("the member process ended before owning its partitions")
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        # The bench measures how fast (bench/twainmq_groups.py); here: that it happens.
        assert wait_until(lambda: (sync(survivor), len(survivor.owned()) == 4)[1])
    finally:
        child.kill()
        child.wait()
    survivor.leave()


def test_a_partition_fenced_while_being_taken_is_not_reported_taken(tmp_path, monkeypatch):
    """A rebalance that reads a partition lock just taken, before it names its new holder,
    sees the previous holder's name (here a killed member's) and fences the partition: it
    moves it to a new epoch and unlinks the lock. The taker must not report that partition
    as taken: its lock is worthless, and the next generation can hand the partition to
    someone else before the taker looks again (two live owners: the threads stress test
    above, on a loaded machine)."""
    paths = GroupPaths.of(tmp_path, "events", "workers")
    child = subprocess.Popen(
        [sys.executable, str(MEMBER_SCRIPT), str(tmp_path), "events", "workers", "4"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        for line in child.stdout:  # the child alone owns every partition
            if line.split() == ["owned", "0", "1", "2", "3"]:
                break
        taker = join(tmp_path)
        for line in child.stdout:  # the child lets go of the taker's two partitions
            if len(line.split()) == 3:
                break
        os.kill(child.pid, signal.SIGKILL)  # its released lock files still name it
        child.wait()
    finally:
        child.kill()
        child.wait()

    fenced, resume = threading.Event(), threading.Event()
    noticing: list[threading.Thread] = []
    real_save, real_try_lock = coordinator.save_state, ownership.try_lock

    def save_when_resumed(paths: GroupPaths, state: GroupState) -> None:
        fenced.set()  # the rebalance has fenced (under the group lock) and is about to save
        assert resume.wait(10)
        real_save(paths, state)

    def try_lock_then_rebalance(path: Path, create: bool = True) -> int | None:
        fd = real_try_lock(path, create)
        if fd is not None and create and not fenced.is_set():
            # Locked, not yet labelled: another member notices the killed one right now.
            noticing.append(
                threading.Thread(target=rebalance, args=(paths, 4, 10.0, MembershipChange()))
            )
            noticing[0].start()
            assert fenced.wait(10)
        return fd

    monkeypatch.setattr(coordinator, "save_state", save_when_resumed)
    monkeypatch.setattr(ownership, "try_lock", try_lock_then_rebalance)
    taken = taker.acquire_pending()
    resume.set()
    for thread in noticing:
        thread.join(10)
    monkeypatch.undo()
    assert fenced.is_set(), "the rebalance never ran: the test proved nothing"
    state = load_state(paths)
    held = taker.owned()
    assert [p for p in taken if held.get(p) != state.epoch(p)] == [], (taken, held, state.epochs)
    settle(taker)  # it takes them in the new epoch at its next check
    assert sorted(taker.owned()) == [0, 1, 2, 3]
    taker.leave()


def test_a_hung_member_is_expelled_after_the_session_timeout_and_fenced(tmp_path):
    settings = GroupSettings(session_timeout=0.4)
    hung, healthy = join(tmp_path, settings=settings), join(tmp_path, settings=settings)
    settle(hung, healthy)
    lost = sorted(hung.owned())
    assert wait_until(lambda: (sync(healthy), len(healthy.owned()) == 4)[1])
    with pytest.raises(CommitFencedError) as caught:
        hung.commit({p: 1 for p in lost})
    assert caught.value.partitions == lost
    hung.refresh()
    assert hung.expelled
    assert hung.revocations() == lost
    hung.release(hung.revocations())
    settle(hung, healthy)  # it rejoins as a new member and gets its share back
    assert len(hung.owned()) == len(healthy.owned()) == 2


def test_commits_are_stored_and_fenced(tmp_path):
    first, second = join(tmp_path), join(tmp_path)
    settle(first, second)
    mine = sorted(first.owned())
    first.commit({p: 10 + p for p in mine})
    assert second.committed() == {p: 10 + p for p in mine}
    with pytest.raises(CommitFencedError):
        first.commit({p: 99 for p in second.owned()})
    assert second.committed() == {p: 10 + p for p in mine}


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "../x", "x" * 201, "sp ace", None])
def test_unsafe_group_names_are_refused_by_value(tmp_path, name):
    with pytest.raises(InvalidGroupNameError, match="invalid group name"):
        GroupPaths.of(tmp_path, "events", name)
