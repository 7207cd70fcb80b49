"""Many processes: concurrent appends stay contiguous and unique; kill -9 loses no ack."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from twainmq import Twain

from .lock_watch import LockWatch

WRITER = str(Path(__file__).with_name("writer_process.py"))


def start_writer(root: Path, writer: str, count: int, fsync: str, acks: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    args = [sys.executable, WRITER, str(root), "t", writer, str(count), fsync, str(acks)]
    return subprocess.Popen(args, stderr=subprocess.PIPE)


def read_acks(path: Path) -> list[tuple[int, str, str]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [(int(s), p, o) for s, p, o in (line.split() for line in lines if line.count(" ") == 2)]


def check_log(
    tmq: Twain,
    found: dict[str, dict[int, tuple[int, int]]] | None = None,
    start: dict[int, int] | None = None,
) -> dict[str, dict[int, tuple[int, int]]]:
    """Read from ``start`` (partition -> offset; the whole log by default) into ``found``;
    check that offsets go on contiguously and that no message is there twice; return
    ``found``: writer -> seq -> (partition, offset)."""
    found = {} if found is None else found
    start = {} if start is None else start
    consumer = tmq.consumer("t")
    consumer.assign({p: start.get(p, 0) for p in tmq.end_offsets("t")})
    by_partition: dict[int, list[int]] = {}
    for message in consumer:
        writer, seq = message.message.split(":")
        assert int(seq) not in found.setdefault(writer, {}), f"duplicate {message}"
        found[writer][int(seq)] = (message.partition, message.offset)
        by_partition.setdefault(message.partition, []).append(message.offset)
    consumer.close()
    for partition, offsets in by_partition.items():
        first = start.get(partition, 0)
        assert offsets == list(range(first, first + len(offsets)))
    return found


@pytest.mark.slow
def test_writers_in_many_processes_get_contiguous_unique_offsets(
    tmq: Twain, tmp_path: Path
) -> None:
    tmq.create_topic("t", partitions=2, segment_bytes=64 * 1024)
    writers = [
        start_writer(tmq.root_dir, f"w{i}", 2000, "never", tmp_path / f"w{i}.acks")
        for i in range(4)
    ]
    consumer = tmq.consumer("t")
    seen: Counter[tuple[int, int]] = Counter()
    deadline = time.monotonic() + 120
    while len(seen) < 8000 and time.monotonic() < deadline:
        for message in consumer.poll_many(500, timeout=0.1):
            seen[(message.partition, message.offset)] += 1
    for process in writers:
        assert process.wait(timeout=60) == 0, process.stderr.read()  # type: ignore[union-attr]
    assert len(seen) == 8000 and set(seen.values()) == {1}
    found = check_log(tmq)
    for i in range(4):
        assert sorted(found[f"w{i}"]) == list(range(2000))
        for seq, partition, offset in read_acks(tmp_path / f"w{i}.acks"):
            if partition != "-":
                assert found[f"w{i}"][seq] == (int(partition), int(offset))


@pytest.mark.slow
@pytest.mark.parametrize("fsync", ["never", "always"])
def test_kill_9_mid_stream_loses_no_acknowledged_write(
    tmq: Twain, tmp_path: Path, fsync: str
) -> None:
    tmq.create_topic("t", partitions=2, segment_bytes=16 * 1024)
    rng = random.Random(fsync)
    acked: dict[str, set[int]] = {}
    found: dict[str, dict[int, tuple[int, int]]] = {}
    checked = {0: 0, 1: 0}  # what earlier rounds read and checked, partition -> end
    for round_number in range(6):
        names = [f"r{round_number}w{i}" for i in range(2)]
        writers = [
            start_writer(tmq.root_dir, n, 10**6, fsync, tmp_path / f"{n}.acks") for n in names
        ]
        for name in names:  # started and writing (interpreter start-up is slow under load)
            deadline = time.monotonic() + 60
            while not read_acks(tmp_path / f"{name}.acks") and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(rng.uniform(0.3, 0.6))
        for process in writers:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        # No TopicCorruptError, offsets contiguous after what earlier rounds checked (the
        # whole log again each round made the test quadratic: 300 s on a loaded machine).
        check_log(tmq, found, checked)
        checked = tmq.end_offsets("t")  # the writers are dead: check_log read up to here
        for name in names:
            acks = read_acks(tmp_path / f"{name}.acks")
            acked[name] = {seq for seq, _, _ in acks}
            for seq, partition, offset in acks:
                if partition != "-":  # a single write: it is where write_message said
                    assert found[name][seq] == (int(partition), int(offset))
        for name, seqs in acked.items():
            missing = seqs - set(found.get(name, {}))
            assert not missing, f"{name}: acknowledged but lost: {sorted(missing)[:10]}"
    assert sum(len(s) for s in acked.values()) > 100  # the writers really wrote
    assert check_log(tmq) == found  # read whole once more: nothing checked earlier went missing


def test_an_exclusive_producer_makes_other_processes_wait(tmq: Twain, tmp_path: Path) -> None:
    tmq.create_topic("t")
    holder = tmq.producer("t", exclusive=True)
    holder.write_message(1, "held:0")
    acks = tmp_path / "w.acks"
    other = start_writer(tmq.root_dir, "w", 5, "never", acks)
    watch = LockWatch(tmq.root_dir / "t" / "0" / "head")

    def got_in() -> bool:
        return other.poll() is not None or bool(read_acks(acks))

    try:
        # It asks for the lock and is refused, also after a write of the holder (where a
        # lazy holder lets go of a wanted lock) and while the holder idles (where a lazy
        # holder lets go within a few ms, far less than the waiter's 20 tries of >= 2 ms).
        assert watch.refused_tries(3, got_in) == 3, "the other process got the lock"
        holder.write_message(1, "held:1")
        assert watch.refused_tries(20, got_in) == 20, "the holder gave its lock away"
        assert tmq.consumer("t").poll().message == "held:0"  # type: ignore[union-attr]
        holder.write_message(1, "held:2")
    finally:
        watch.close()
        holder.close()
    assert other.wait(timeout=60) == 0, other.stderr.read()  # type: ignore[union-attr]
    found = check_log(tmq)
    held = sorted(offset for _, offset in found["held"].values())
    theirs = sorted(offset for _, offset in found["w"].values())
    assert (held, theirs) == ([0, 1, 2], [3, 4, 5, 6, 7])  # it wrote only after the release
