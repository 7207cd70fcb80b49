"""Checksums on every file read back: index entries, heads, the durable log start, group files.

Each file is damaged by hand, as a disk, a backup tool or an operator does, and the test
asserts the guard: a damaged index is never trusted (seeks stay exact) and is rebuilt, a
damaged head is recomputed, hand-deleted oldest segments are not taken for retention, a
damaged group file raises an error naming the group and the file and ``groups reset``
repairs it, and ``on_gap="skip"`` skips a gap only with a warning.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import warnings
from pathlib import Path

import pytest

from twainmq import TopicCorruptError, Twain
from twainmq.cli import main
from twainmq.encoding import INDEX_ENTRY, INDEX_MAGIC, decode_index
from twainmq.groups import GroupFileCorruptError, GroupPaths, MemberStatus
from twainmq.groups.commit_log import CommitLog
from twainmq.groups.membership import member_status
from twainmq.segments import read_index

RECORD = 66  # 18 header + 2 key + 46 payload
PER_SEGMENT = 1024 // RECORD
WRITTEN = 300
STORE_V1 = Path(__file__).parent / "data" / "store_v1"


def _text(number: int) -> str:
    return f"m{number:05d}" + "x" * 40


def _partition(tmq: Twain, partition: int = 0) -> Path:
    return tmq.root_dir / "t" / str(partition)


def _write(tmq: Twain, **settings: int) -> list[int]:
    tmq.create_topic("t", segment_bytes=1024, index_interval_bytes=64, **settings)
    with tmq.producer("t") as producer:
        for number in range(WRITTEN):
            producer.write_message(1, _text(number))
    return sorted(int(p.name[:-4]) for p in _partition(tmq).glob("*.log"))


def _flip(path: Path, byte: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[byte] ^= 1 << bit
    path.write_bytes(bytes(data))


def _read_all(tmq: Twain, **options: str) -> list[tuple[int, str]]:
    with tmq.consumer("t", **options) as consumer:
        return [(m.offset, m.message) for m in consumer]


def _expected(offsets: range) -> list[tuple[int, str]]:
    return [(n, _text(n)) for n in offsets]


def _seeks_are_exact(tmq: Twain) -> None:
    with tmq.consumer("t") as consumer:
        for offset in range(0, WRITTEN, 7):
            consumer.seek(0, offset)
            message = consumer.poll()
            assert message is not None and (message.offset, message.message) == (
                offset,
                _text(offset),
            )


# --- index entries ------------------------------------------------------------------------


@pytest.mark.parametrize("field_byte", [0, 1, 4, 5, 8])  # relative offset, position, timestamp
def test_a_bit_flip_in_a_sealed_index_never_misplaces_a_seek(tmq: Twain, field_byte: int) -> None:
    bases = _write(tmq)
    sealed = _partition(tmq) / f"{bases[3]:020d}.idx"
    for entry in range(4):  # every record has an entry here (64-byte interval)
        _flip(sealed, len(INDEX_MAGIC) + entry * INDEX_ENTRY.size + field_byte, entry % 3)
    assert len(read_index(sealed, bases[3])) == PER_SEGMENT - 4  # the damaged ones left out
    _seeks_are_exact(tmq)
    # The first reader that needed it rebuilt it from the segment.
    entries, problem = decode_index(sealed.read_bytes(), bases[3])
    assert problem is None and len(entries) == PER_SEGMENT


def test_a_bit_flip_in_the_active_index_is_rebuilt_on_open(tmq: Twain) -> None:
    bases = _write(tmq)
    active = _partition(tmq) / f"{bases[-1]:020d}.idx"
    _flip(active, len(INDEX_MAGIC) + INDEX_ENTRY.size + 4, 2)  # the second entry's position
    _seeks_are_exact(tmq)
    entries, problem = decode_index(active.read_bytes(), bases[-1])
    assert problem is None and len(entries) == WRITTEN - bases[-1]
    with tmq.producer("t") as producer:  # appending goes on after the rebuilt entries
        assert producer.write_message(1, _text(WRITTEN)).offset == WRITTEN
    assert decode_index(active.read_bytes(), bases[-1])[1] is None


def test_an_index_copied_from_another_segment_is_not_trusted(tmq: Twain) -> None:
    bases = _write(tmq)
    directory = _partition(tmq)
    shutil.copyfile(directory / f"{bases[2]:020d}.idx", directory / f"{bases[5]:020d}.idx")
    assert read_index(directory / f"{bases[5]:020d}.idx", bases[5]) == []
    _seeks_are_exact(tmq)


def test_a_seek_never_trusts_a_damaged_record_length(tmq: Twain) -> None:
    # 64-byte records (18 header + 2 key + 44 payload), one index entry for the whole sealed
    # segment: a seek counts records from byte 0. Record 10's length 60 flipped to 124 spans
    # exactly two records, so without a CRC check a seek past it landed one record too far.
    tmq.create_topic("t", segment_bytes=4096, index_interval_bytes=4096)
    with tmq.producer("t") as producer:
        for number in range(100):
            producer.write_message(1, f"r{number:03d}" + "y" * 40)
    _flip(_partition(tmq) / f"{0:020d}.log", 10 * 64, 6)
    with tmq.consumer("t") as consumer:
        consumer.seek(0, 5)
        assert consumer.poll().message == "r005" + "y" * 40  # type: ignore[union-attr]
        with pytest.raises(TopicCorruptError, match=f"{0:020d}.log: corrupt record at byte 640"):
            consumer.seek(0, 50)
            consumer.poll()


# --- heads --------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["segment_base", "end", "next_offset"])
def test_a_damaged_head_is_recomputed_from_the_segments(tmq: Twain, field: str) -> None:
    _write(tmq)
    at = {"segment_base": 8, "end": 16, "next_offset": 24}[field]
    _flip(_partition(tmq) / "head", at + 3, 1)  # a bit of the field's fourth byte
    assert _read_all(tmq) == _expected(range(WRITTEN))
    assert tmq.end_offsets("t") == {0: WRITTEN}
    with tmq.producer("t") as producer:
        assert producer.write_message(1, _text(WRITTEN)).offset == WRITTEN
    assert _read_all(tmq) == _expected(range(WRITTEN + 1))


def test_check_reports_a_damaged_head_as_repaired_on_open(
    tmq: Twain, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmq)
    _flip(_partition(tmq) / "head", 20)
    assert main(["--root", str(tmq.root_dir), "check", "t"]) == 0
    out = capsys.readouterr().out
    assert f"{_partition(tmq) / 'head'}: damaged: fails its checksum (recomputed on open)" in out


# --- durable log start ----------------------------------------------------------------------


def test_hand_deleted_oldest_segments_are_not_taken_for_retention(tmq: Twain) -> None:
    bases = _write(tmq)
    for base in bases[:2]:
        (_partition(tmq) / f"{base:020d}.log").unlink()
    with tmq.consumer("t") as consumer, pytest.raises(TopicCorruptError) as info:
        consumer.poll()
    assert info.value.offsets == range(0, bases[2])
    assert info.value.path == str(_partition(tmq) / f"{0:020d}.log")
    with tmq.consumer("t") as consumer, pytest.raises(TopicCorruptError):
        consumer.beginning_offsets()


def test_retention_records_the_log_start_and_readers_move_up_to_it(tmq: Twain) -> None:
    _write(tmq, retention_bytes=4096)
    got = _read_all(tmq)
    start = int.from_bytes((_partition(tmq) / "log-start").read_bytes()[8:16], "little")
    oldest = min(int(p.name[:-4]) for p in _partition(tmq).glob("*.log"))
    assert start == oldest > 0
    assert got == _expected(range(start, WRITTEN))
    with tmq.consumer("t") as consumer:
        assert consumer.beginning_offsets() == {0: start}


def test_a_damaged_log_start_file_is_reported_naming_it(tmq: Twain) -> None:
    _write(tmq, retention_bytes=4096)
    path = _partition(tmq) / "log-start"
    _flip(path, 10)
    with pytest.raises(TopicCorruptError, match=str(path)):
        _read_all(tmq)


# --- on_gap -------------------------------------------------------------------------------


def test_on_gap_skip_moves_past_a_missing_segment_with_a_warning(
    tmq: Twain, caplog: pytest.LogCaptureFixture
) -> None:
    bases = _write(tmq)
    gone = bases[4]
    (_partition(tmq) / f"{gone:020d}.log").unlink()
    with pytest.raises(TopicCorruptError):
        _read_all(tmq)  # the default is raise
    with caplog.at_level(logging.WARNING, logger="twainmq"):
        got = _read_all(tmq, on_gap="skip")
    assert got == _expected(range(gone)) + _expected(range(bases[5], WRITTEN))
    [record] = [r for r in caplog.records if r.name == "twainmq"]
    assert f"{gone:020d}.log" in record.getMessage()
    assert f"partition 0, offsets {gone}..{bases[5] - 1}" in record.getMessage()


def test_on_gap_skip_moves_past_missing_oldest_segments(
    tmq: Twain, caplog: pytest.LogCaptureFixture
) -> None:
    bases = _write(tmq)
    (_partition(tmq) / f"{0:020d}.log").unlink()
    with caplog.at_level(logging.WARNING, logger="twainmq"):
        assert _read_all(tmq, on_gap="skip") == _expected(range(bases[1], WRITTEN))
    assert f"offsets 0..{bases[1] - 1}" in caplog.text


def test_twainmq_consume_can_skip_a_gap(tmq: Twain, capsys: pytest.CaptureFixture[str]) -> None:
    bases = _write(tmq)
    (_partition(tmq) / f"{bases[4]:020d}.log").unlink()
    root = str(tmq.root_dir)
    assert main(["--root", root, "consume", "t", "--on-gap", "skip"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == WRITTEN - (bases[5] - bases[4])
    assert f"{bases[4]:020d}.log" in err
    assert main(["--root", root, "consume", "t"]) == 1


def test_on_gap_is_checked(tmq: Twain) -> None:
    _write(tmq)
    with pytest.raises(ValueError, match="on_gap"):
        tmq.consumer("t", on_gap="ignore")


# --- group files ----------------------------------------------------------------------------


def _group(tmq: Twain, committed: int = 120) -> GroupPaths:
    tmq.create_topic("t", partitions=2)
    with tmq.producer("t", partitioner=lambda key, partitions: key) as producer:
        for number in range(400):
            producer.write_message(number % 2, _text(number))
    with tmq.consumer("t", group="g") as consumer:
        consumer.commit({0: committed, 1: committed})
    return GroupPaths.of(tmq.root_dir, "t", "g")


def _resumes_at(tmq: Twain) -> dict[int, int]:
    with tmq.consumer("t", group="g") as consumer:
        first: dict[int, int] = {}
        while len(first) < 2:
            message = consumer.poll(timeout=2)
            assert message is not None
            first.setdefault(message.partition, message.offset)
        return first


@pytest.mark.parametrize("damage", ["flip", "cut", "delete"])
def test_a_damaged_commit_log_names_the_group_and_file_and_reset_repairs_it(
    tmq: Twain, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _group(tmq)
    path = paths.commit_log
    data = path.read_bytes()
    if damage == "flip":
        # The last record's offset of partition 1 (120 = 0x78 -> 0x68 = 104): a moved position.
        _flip(path, len(data) - 8, 4)
    elif damage == "cut":
        path.write_bytes(data[:-5])
    else:
        path.unlink()
    with pytest.raises(GroupFileCorruptError) as info:
        _resumes_at(tmq)
    assert info.value.group == "g" and info.value.path == path
    assert "'g'" in str(info.value) and str(path) in str(info.value)
    root = str(tmq.root_dir)
    assert main(["--root", root, "groups", "describe", "t", "g"]) == 1
    assert str(path) in capsys.readouterr().err
    assert main(["--root", root, "groups", "list"]) == 0
    assert f"DAMAGED: {path}" in capsys.readouterr().out
    assert main(["--root", root, "check", "t"]) == 1
    assert f"{path}: " in capsys.readouterr().out
    # A damaged log can only be replaced whole: a reset of one partition says so.
    assert (
        main(["--root", root, "groups", "reset", "t", "g", "--to-offset", "9", "--partition", "0"])
        == 1
    )
    assert "reset every partition" in capsys.readouterr().err
    assert main(["--root", root, "groups", "reset", "t", "g", "--to-offset", "100"]) == 0
    assert _resumes_at(tmq) == {0: 100, 1: 100}


def test_garbage_after_the_commit_log_is_a_torn_tail_and_ignored(tmq: Twain) -> None:
    paths = _group(tmq)
    with open(paths.commit_log, "ab") as file:
        file.write(b"\x00garbage")  # as a writer killed mid-write leaves it
    assert _resumes_at(tmq) == {0: 120, 1: 120}
    assert main(["--root", str(tmq.root_dir), "check", "t"]) == 0


@pytest.mark.parametrize("damage", ["flip", "cut", "append"])
def test_a_damaged_group_state_names_the_file_and_reset_repairs_it(tmq: Twain, damage: str) -> None:
    paths = _group(tmq)
    data = paths.state.read_bytes()
    if damage == "flip":
        _flip(paths.state, data.index(b'"generation"') + len('"generation": ') + 1)
    elif damage == "cut":
        paths.state.write_bytes(data[:-3])
    else:
        paths.state.write_bytes(data + b"{}")
    with pytest.raises(GroupFileCorruptError, match=str(paths.state)):
        _resumes_at(tmq)
    root = str(tmq.root_dir)
    assert main(["--root", root, "groups", "reset", "t", "g", "--to-offset", "7"]) == 0
    assert _resumes_at(tmq) == {0: 7, 1: 7}


def test_a_lost_group_state_keeps_the_commits_and_their_epochs(tmq: Twain) -> None:
    paths = _group(tmq)
    paths.state.unlink()
    assert _resumes_at(tmq) == {0: 120, 1: 120}
    with tmq.consumer("t", group="g", start_from="now") as consumer:
        consumer.commit({0: 130, 1: 130})
    paths.state.unlink()
    with tmq.consumer("t", group="g", start_from="now") as consumer:
        assert consumer.committed() == {0: 130, 1: 130}


def test_a_lost_group_state_does_not_move_epochs_back(tmq: Twain) -> None:
    paths = _group(tmq)
    # As after a hung member was fenced three times: partition 0's commits are in epoch 3.
    log = CommitLog(paths)
    log.append([(0, 3, 120)])
    log.close()
    paths.state.unlink()
    with tmq.consumer("t", group="g") as consumer:
        assert consumer.committed() == {0: 120, 1: 120}
        consumer.commit({0: 125, 1: 125})  # in epoch 3: not refused as overtaken
    with tmq.consumer("t", group="g") as consumer:
        assert consumer.committed() == {0: 125, 1: 125}


# --- a store written by the previous version --------------------------------------------------


def test_a_store_written_before_checksums_opens_and_is_upgraded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Written by twainmq before checksums (tests/twainmq/data/make_store_v1.py): legacy heads,
    # indexes without CRC, commits and group state without checksum, retention-deleted
    # segments but no log-start file.
    root = tmp_path / "store"
    shutil.copytree(STORE_V1, root)
    tmq = Twain(root)
    events = {(0, n): f"event {n:04d} " + "x" * 30 for n in range(200)}
    with tmq.consumer("events") as consumer:
        got = [(m.key, m.message) for m in consumer]
    assert sorted(message for _, message in got) == sorted(events.values())
    with tmq.consumer("kept") as consumer:
        assert consumer.beginning_offsets() == {0: 153}
        assert [m.message for m in consumer] == [
            f"kept {n:04d} " + "y" * 30 for n in range(153, 200)
        ]
    with tmq.consumer("events", group="g") as group:
        assert group.committed() == {0: 60, 1: 60}
        first = group.poll(timeout=2)
        assert first is not None and first.offset == 60
        group.commit({0: 61, 1: 61})
    # Upgraded: checksummed heads and indexes, a durable log start, a version-2 group.
    for directory in (root / "events" / "0", root / "kept" / "0"):
        assert (directory / "head").read_bytes()[:8] == b"TWHEAD02"
        for index in directory.glob("*.idx"):
            assert decode_index(index.read_bytes(), int(index.name[:-4]))[1] is None
    assert (root / "kept" / "0" / "log-start").exists()
    group_dir = root / ".groups" / "events" / "g"
    assert (group_dir / "commits.log").exists() and not (group_dir / "commits").exists()
    with tmq.producer("events", partitioner=lambda key, partitions: key) as producer:
        assert producer.write_message(0, "after").offset == 113
    for topic in ("events", "kept"):
        assert main(["--root", str(root), "check", topic]) == 0
    assert "DAMAGED" not in capsys.readouterr().out


# --- twainmq check and describe ----------------------------------------------------------------


def test_check_names_every_damaged_file_and_exits_non_zero(
    tmq: Twain, capsys: pytest.CaptureFixture[str]
) -> None:
    bases = _write(tmq)
    root = str(tmq.root_dir)
    assert main(["--root", root, "check", "t"]) == 0
    assert "partition 0: offsets 0..300 (300 records): ok" in capsys.readouterr().out
    directory = _partition(tmq)
    (directory / f"{bases[3]:020d}.log").unlink()
    _flip(directory / f"{bases[7]:020d}.log", 30)
    assert main(["--root", root, "check", "t"]) == 1
    out = capsys.readouterr().out
    assert f"readable 0..{bases[3]} only" in out
    assert f"{directory / f'{bases[2]:020d}.log'}: gap: offsets {bases[3]}..{bases[4] - 1}" in out
    assert f"{directory / f'{bases[7]:020d}.log'}: record at byte 0 fails its checks" in out
    assert "DAMAGED" in out


def test_check_and_describe_of_a_damaged_config_fail_without_a_traceback(
    tmq: Twain, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmq)
    _flip(tmq.root_dir / "t.twc", 20)
    for command in ("check", "describe"):
        assert main(["--root", str(tmq.root_dir), command, "t"]) == 1
        err = capsys.readouterr().err
        assert "t.twc" in err and "Traceback" not in err


def test_check_of_a_missing_topic_or_store_is_one_error_line(
    tmq: Twain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmq)
    for root, topic in ((str(tmq.root_dir), "nope"), (str(tmp_path / "none"), "t")):
        assert main(["--root", root, "check", topic]) == 1
        err = capsys.readouterr().err
        assert err.startswith("twainmq: error: ") and len(err.splitlines()) == 1


def test_describe_flags_missing_segments(tmq: Twain, capsys: pytest.CaptureFixture[str]) -> None:
    bases = _write(tmq)
    (_partition(tmq) / f"{0:020d}.log").unlink()
    assert main(["--root", str(tmq.root_dir), "describe", "t"]) == 0
    out = capsys.readouterr().out
    missing = _partition(tmq) / f"{0:020d}.log"
    assert f"DAMAGED: {missing}: missing: offsets 0..{bases[1] - 1}" in out


# --- unclosed group consumers ------------------------------------------------------------------


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_an_unclosed_group_consumer_frees_its_membership_and_files(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=4)
    with tmq.producer("t") as producer:
        for key in range(16):
            producer.write_message(key, "m")
    gc.collect()
    baseline = len(os.listdir("/proc/self/fd"))
    paths = GroupPaths.of(tmq.root_dir, "t", "g")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(20):
            group = tmq.consumer("t", group="g")
            assert group.poll(timeout=1) is not None
            member = group.member_id
            del group
            gc.collect()
            assert member_status(paths, member, 10.0) is MemberStatus.DEAD
    assert len(os.listdir("/proc/self/fd")) == baseline
    assert sum(issubclass(w.category, ResourceWarning) for w in caught) == 20
    with tmq.consumer("t", group="g") as survivor:  # takes every partition at once
        assert survivor.assignment() == [0, 1, 2, 3]


# --- a writer killed holding the lock ------------------------------------------------------

_TORN_WRITER = """
import fcntl, mmap, os, struct, sys, time
sys.path[:0] = [{src!r}]
from twainmq.encoding import frame, TAG_TEXT
head = os.open({head!r}, os.O_RDWR)
fcntl.flock(head, fcntl.LOCK_EX)
page = mmap.mmap(head, mmap.PAGESIZE)
page[52:56] = bytes(4)  # taking the lock: unsealed
base, end = struct.unpack_from("<qq", page, 8)
record = frame((1).to_bytes(2, "little"), 0, TAG_TEXT, b"torn write")
segment = os.open(os.path.join(os.path.dirname({head!r}), f"{{base:020d}}.log"), os.O_WRONLY)
os.pwrite(segment, record, end)
struct.pack_into("<q", page, 16, end + len(record))  # the end stored, not yet the next offset
print("ready", flush=True)
time.sleep(60)
"""


def test_a_writer_taking_the_lock_of_one_killed_mid_write_recovers_first(tmq: Twain) -> None:
    import signal
    import subprocess
    import sys

    import twainmq

    tmq.create_topic("t")
    producer = tmq.producer("t")
    for number in range(3):
        producer.write_message(1, _text(number))
    producer.close()
    survivor = tmq.producer("t")  # opened (and recovered) before the other writer dies
    survivor.write_message(1, _text(3))
    survivor._topic.log(0).release()  # type: ignore[attr-defined]  # as its idle release would
    src = str(Path(twainmq.__file__).parents[1])
    code = _TORN_WRITER.format(src=src, head=str(_partition(tmq) / "head"))
    killed = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert killed.stdout is not None and killed.stdout.readline() == "ready\n"
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    # Its record is whole past the head's end: recovery keeps it (offset 4), so the
    # survivor's next record is 5, and it says so.
    assert survivor.write_message(1, "after").offset == 5
    survivor.close()
    with tmq.consumer("t") as consumer:
        assert [(m.offset, m.message) for m in consumer][-2:] == [(4, "torn write"), (5, "after")]
