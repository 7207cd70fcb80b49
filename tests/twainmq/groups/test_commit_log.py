"""The group commit log: one checksummed record per commit call, torn records skipped,
damage reported, group sync, compaction, migration from per-partition files, kill -9."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import wait_until
from tests.sync_log import record_syncs
from twainmq import Twain
from twainmq.cli import main
from twainmq.groups import GroupPaths, commit_log
from twainmq.groups.commit_log import CommitLog, read_log
from twainmq.groups.commit_log_format import (
    HEADER_BYTES,
    LogFormatError,
    decode_header,
    encode_header,
    encode_record,
    replay,
)
from twainmq.groups.commits import read_commits
from twainmq.groups.state import load_state

STORE_V2 = Path(__file__).parent.parent / "data" / "store_v2"
WORKER = Path(__file__).parent / "commit_worker.py"

entries = st.lists(
    st.tuples(st.integers(0, 300), st.integers(0, 5), st.integers(-1, 1 << 40)),
    min_size=1,
    max_size=40,
)


def _log(records: list[bytes]) -> bytes:
    body = b"".join(records)
    return encode_header(HEADER_BYTES + len(body), 0) + body


def _replayed(data: bytes) -> dict[int, tuple[int, int]]:
    table: dict[int, tuple[int, int]] = {}
    replay(data, HEADER_BYTES, decode_header(data)[0], table)
    return table


# --- the format ----------------------------------------------------------------------------


@given(st.lists(entries, min_size=2, max_size=6), st.data())
def test_a_torn_record_is_skipped_wherever_it_is(records, data) -> None:
    encoded = [encode_record(r) for r in records]
    torn = data.draw(st.integers(0, len(encoded) - 1))
    cut = data.draw(st.integers(1, len(encoded[torn]) - 1))
    # A writer killed mid-write: its record cut short, other writers' records after it.
    damaged = _log([*encoded[:torn], encoded[torn][:cut], *encoded[torn + 1 :]])
    assert _replayed(damaged) == _replayed(_log(encoded[:torn] + encoded[torn + 1 :]))


@given(st.lists(entries, min_size=1, max_size=5), st.data())
def test_any_flipped_bit_in_a_record_is_damage_not_a_torn_record(records, data) -> None:
    whole = bytearray(_log([encode_record(r) for r in records]))
    position = data.draw(st.integers(HEADER_BYTES, len(whole) - 1))
    whole[position] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(LogFormatError):
        _replayed(bytes(whole))


def test_a_cut_below_the_header_end_is_damage_and_bytes_past_it_a_torn_tail() -> None:
    whole = _log([encode_record([(0, 0, 5)]), encode_record([(0, 0, 6)])])
    with pytest.raises(LogFormatError, match="cut"):
        _replayed(whole[: len(whole) - 24])  # exactly one record fewer: still a cut
    assert _replayed(whole + b"\x00garbage")[0] == (0, 6)
    with pytest.raises(LogFormatError, match="header"):
        _replayed(whole[:9] + b"\x01" + whole[10:])  # the end field


def test_an_entry_of_an_older_epoch_is_a_fenced_late_commit_and_ignored() -> None:
    whole = _log([encode_record(r) for r in ([(3, 0, 10)], [(3, 1, 10)], [(3, 0, 99)])])
    assert _replayed(whole) == {3: (1, 10)}


# --- commits through members ---------------------------------------------------------------


def _topic(tmq: Twain, partitions: int = 4) -> GroupPaths:
    tmq.create_topic("t", partitions=partitions)
    return GroupPaths.of(tmq.root_dir, "t", "g")


def test_one_commit_call_is_one_record_whatever_the_partitions(tmq: Twain) -> None:
    paths = _topic(tmq, partitions=64)
    with tmq.consumer("t", group="g") as consumer:
        before = paths.commit_log.stat().st_size
        consumer.commit({p: 7 for p in range(64)})
        after = paths.commit_log.stat().st_size
        assert after - before == 16 + 64 * 16  # one record head, 64 entries
        consumer.commit({p: 7 for p in range(64)})  # unchanged: nothing written
        assert paths.commit_log.stat().st_size == after
    assert read_commits(paths) == {p: 7 for p in range(64)}


def test_commits_of_several_members_and_compaction_keep_every_latest_offset(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commit_log, "COMPACT_BYTES", 2048)
    compactions: list[int] = []
    real_create = commit_log.create_log

    def counting_create(paths: GroupPaths, entries: list, replace: bool = False) -> None:
        compactions.append(len(entries))
        real_create(paths, entries, replace)

    monkeypatch.setattr(commit_log, "create_log", counting_create)
    paths = _topic(tmq)
    first = tmq.consumer("t", group="g")
    second = tmq.consumer("t", group="g")
    try:
        assert wait_until(lambda: (first.poll(), second.poll()) and len(first.assignment()) == 2)
        inodes = set()
        for number in range(1, 400):
            first.commit({p: number for p in first.assignment()})
            second.commit({p: 2 * number for p in second.assignment()})
            inodes.add(paths.commit_log.stat().st_ino)
        expected = {p: 399 for p in first.assignment()} | {p: 798 for p in second.assignment()}
        assert read_commits(paths) == expected
        assert len(compactions) > 5  # compacted many times, each time to one entry a partition
        assert set(compactions) == {4}
        assert paths.commit_log.stat().st_size < 4096
    finally:
        first.close()
        second.close()
    assert read_commits(paths) == expected


def test_never_leaves_commits_to_the_kernel(tmq: Twain, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _topic(tmq)
    with tmq.consumer("t", group="g") as consumer:
        syncs = record_syncs(monkeypatch)
        for number in range(20):
            consumer.commit({0: number, 1: number})
    assert [s for s in syncs.syncs if s.path == str(paths.commit_log)] == []


def test_always_syncs_each_commit_before_it_returns(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _topic(tmq)
    with tmq.consumer("t", group="g", commit_fsync="always") as consumer:
        syncs = record_syncs(monkeypatch)
        for number in range(5):
            consumer.commit({0: number + 1})
            assert len(syncs.of_files("commits.log")) == number + 1
            end, synced = decode_header(paths.commit_log.read_bytes())
            assert synced == end == paths.commit_log.stat().st_size


def test_concurrent_commits_share_one_fsync(tmq: Twain, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _topic(tmq, partitions=8)
    with tmq.consumer("t", group="g"):
        pass  # creates the group and its log
    logs = [CommitLog(paths, "always") for _ in range(8)]
    size = paths.commit_log.stat().st_size
    record = len(encode_record([(0, 0, 1)]))
    real = os.fdatasync
    calls: list[int] = []

    def slow_first_sync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:  # the first leader waits until every other thread appended
            assert wait_until(lambda: paths.commit_log.stat().st_size >= size + 8 * record)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_first_sync)
    threads = [
        threading.Thread(target=log.append, args=([(p, 0, 100 + p)],)) for p, log in enumerate(logs)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for log in logs:
        log.close()
    assert len(calls) == 2  # the first commit's, then one for the seven that waited
    assert read_commits(paths) == {p: 100 + p for p in range(8)}


def test_batch_syncs_in_the_background(tmq: Twain, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _topic(tmq)
    with tmq.consumer("t", group="g", commit_fsync="batch") as consumer:
        syncs = record_syncs(monkeypatch)
        for number in range(50):
            consumer.commit({0: number + 1})
        assert wait_until(
            lambda: (
                decode_header(paths.commit_log.read_bytes())[1] > 0
                and bool(syncs.of_files("commits.log"))
            )
        )
        assert wait_until(
            lambda: (
                decode_header(paths.commit_log.read_bytes())[1] == paths.commit_log.stat().st_size
            )
        )
        assert 1 <= len(syncs.of_files("commits.log")) < 50
        assert {s.thread for s in syncs.of_files("commits.log")} == {"twainmq-commit-sync"}


def test_commit_fsync_is_checked(tmq: Twain) -> None:
    _topic(tmq)
    with pytest.raises(ValueError, match="commit_fsync"):
        tmq.consumer("t", group="g", commit_fsync="sometimes")
    with pytest.raises(ValueError, match="not both"):
        tmq.consumer("t", group="g", commit_fsync="always", durable_commits=True)


def test_a_torn_record_of_a_killed_writer_is_skipped_and_commits_go_on(tmq: Twain) -> None:
    paths = _topic(tmq)
    with tmq.consumer("t", group="g") as consumer:
        consumer.commit({0: 5, 1: 5})
        with open(paths.commit_log, "ab") as file:
            file.write(encode_record([(0, 0, 77), (1, 0, 77)])[:21])  # killed mid-write
        assert consumer.committed() == {0: 5, 1: 5}
        consumer.commit({0: 6, 1: 6})
        assert consumer.committed() == {0: 6, 1: 6}
    assert main(["--root", str(tmq.root_dir), "check", "t"]) == 0


# --- a store written before the commit log -------------------------------------------------


def test_a_store_with_per_partition_commit_files_opens_and_is_migrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Written by the previous version (tests/twainmq/data/make_store_v2.py): a version-2
    # group, a checksummed commit file per partition, partition 3 never committed.
    root = tmp_path / "store"
    shutil.copytree(STORE_V2, root)
    paths = GroupPaths.of(root, "orders", "billing")
    assert main(["--root", str(root), "groups", "describe", "orders", "billing"]) == 0
    described = capsys.readouterr().out
    assert " 20 " in described  # partition 1's commit, read from its file before migration
    tmq = Twain(root)
    with tmq.consumer("orders", group="billing") as group:
        assert group.committed() == {0: 10, 1: 20, 2: 5}
        first: dict[int, int] = {}
        while len(first) < 3:  # partition 1 was read to its end (20 messages each)
            message = group.poll(timeout=2)
            assert message is not None
            first.setdefault(message.partition, message.offset)
        assert first == {0: 10, 2: 5, 3: 0}
        group.commit({3: 4})
    assert paths.commit_log.exists() and not paths.commits.exists()
    state = load_state(paths)
    assert state is not None and state.version == 3
    assert read_log(paths) == {0: (0, 10), 1: (0, 20), 2: (0, 5), 3: (0, 4)}
    assert main(["--root", str(root), "check", "orders"]) == 0
    assert main(["--root", str(root), "groups", "list"]) == 0
    assert "DAMAGED" not in capsys.readouterr().out


# --- kill -9 in the middle of commits --------------------------------------------------------


@pytest.mark.parametrize("fsync", ["never", "always"])
def test_kill_9_mid_commit_leaves_the_old_or_the_new_offsets_never_a_mix(
    tmq: Twain, fsync: str
) -> None:
    # Each call commits the same offset for all 256 partitions: a record of ~4 KiB, which
    # crosses a page boundary, so a kill can cut it short. Whatever survives, every
    # partition must hold the offset of one and the same call.
    paths = _topic(tmq, partitions=256)
    rng = random.Random(15)
    last = 0
    for _ in range(8):
        worker = subprocess.Popen(
            [sys.executable, str(WORKER), str(tmq.root_dir), "t", "g", "256", fsync],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            assert worker.stdout is not None and worker.stdout.readline() == b"committing\n"
            time.sleep(rng.uniform(0.005, 0.08))
        finally:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
        committed = read_commits(paths)
        assert len(set(committed.values())) == 1, f"a mix: {sorted(set(committed.values()))}"
        [value] = set(committed.values())
        assert value >= last
        last = value
    assert main(["--root", str(tmq.root_dir), "check", "t"]) == 0
