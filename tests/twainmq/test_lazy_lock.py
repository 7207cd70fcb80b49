"""Lazy lock release: a producer keeps a partition's lock between writes, yet never starves
other writers (any process), never blocks readers, and a killed holder frees the partition."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import wait_until
from twainmq import Twain

from .lock_watch import LockWatch
from .test_processes import check_log, read_acks, start_writer

HOLD_AND_SLEEP = """
import sys, time
from twainmq import Twain
producer = Twain(sys.argv[1]).producer("t", exclusive=True)
producer.write_message(1, "held:0")
print("written", flush=True)
time.sleep(600)
"""


def head_of(tmq: Twain) -> Path:
    return tmq.root_dir / "t" / "0" / "head"


def lock_is_free(head: Path) -> bool:
    """Whether a new open file can take the partition's lock now (then gives it back)."""
    fd = os.open(head, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing the only file of a flock releases it
    return True


def start_holder(tmq: Twain) -> subprocess.Popen:  # type: ignore[type-arg]
    args = [sys.executable, "-c", HOLD_AND_SLEEP, str(tmq.root_dir)]
    holder = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "written\n"
    return holder


def test_a_writer_holds_the_lock_between_writes_and_gives_it_back_when_idle(
    tmq: Twain,
) -> None:
    tmq.create_topic("t", partitions=1)
    producer = tmq.producer("t")
    kept = []
    for number in range(50):  # the lock is kept for >= 1 ms: a stalled test thread may miss it
        producer.write_message(1, str(number))
        kept.append(not lock_is_free(head_of(tmq)))
        assert wait_until(lambda: lock_is_free(head_of(tmq)))  # given back once idle
    assert any(kept)
    assert producer.write_message(1, "last").offset == 50
    producer.close()
    assert lock_is_free(head_of(tmq))


@pytest.mark.slow
def test_another_process_writes_while_this_one_writes_without_pause(
    tmq: Twain, tmp_path: Path
) -> None:
    tmq.create_topic("t", partitions=1, segment_bytes=64 * 1024)
    ours = tmq.producer("t")
    ours.write_message(1, "ours:0")
    other = start_writer(tmq.root_dir, "other", 300, "never", tmp_path / "other.acks")
    written = 1
    deadline = time.monotonic() + 120
    while other.poll() is None and time.monotonic() < deadline:
        ours.write_message(1, f"ours:{written}")  # never idle: the other asks via the head
        written += 1
    ours.close()
    assert other.wait(timeout=60) == 0, other.stderr.read()  # type: ignore[union-attr]
    found = check_log(tmq)  # offsets contiguous and unique
    assert sorted(found["ours"]) == list(range(written))
    assert sorted(found["other"]) == list(range(300))
    other_offsets = [offset for _, offset in found["other"].values()]
    ours_last = max(offset for _, offset in found["ours"].values())
    assert min(other_offsets) < ours_last  # it got in while we were still writing
    for seq, partition, offset in read_acks(tmp_path / "other.acks"):
        if partition != "-":
            assert found["other"][seq] == (0, int(offset))


def test_two_producers_in_one_thread_take_turns(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=1)
    first, second = tmq.producer("t"), tmq.producer("t")
    offsets = [p.write_message(1, str(i)).offset for i in range(20) for p in (first, second)]
    assert offsets == list(range(40))
    first.close()
    second.close()


def test_a_lazy_holder_killed_with_kill_9_mid_stream_frees_the_partition(
    tmq: Twain, tmp_path: Path
) -> None:
    tmq.create_topic("t", partitions=1)
    acks = tmp_path / "w.acks"
    writer = start_writer(tmq.root_dir, "w", 10**6, "never", acks)
    try:
        assert wait_until(lambda: len(read_acks(acks)) > 50)  # writing, so holding the lock
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
    acked = {seq for seq, _, _ in read_acks(acks)}
    with tmq.producer("t") as producer:
        after = producer.write_message(1, "after:0").offset
    found = check_log(tmq)
    assert acked <= set(found["w"]) and found["after"][0] == (0, after)


def test_an_idle_exclusive_holder_keeps_the_lock_until_kill_9_frees_it(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=1)
    holder = start_holder(tmq)
    written: list[int] = []

    def write_after() -> None:
        with tmq.producer("t") as producer:
            written.append(producer.write_message(1, "after").offset)

    waiter = threading.Thread(target=write_after)
    watch = LockWatch(head_of(tmq))
    try:
        consumer = tmq.consumer("t")  # readers never wait for the holder
        assert consumer.poll(timeout=10).message == "held:0"  # type: ignore[union-attr]
        waiter.start()
        # Idle and asked, an exclusive holder keeps the lock (a lazy one would let go
        # within a few ms: far less than 20 refused tries of >= 2 ms each).
        assert watch.refused_tries(20, lambda: not waiter.is_alive()) == 20
        assert written == []
    finally:
        watch.close()
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    waiter.join(timeout=60)
    assert written == [1]  # the waiting writer got the partition once the holder died
    assert [m.message for m in tmq.consumer("t").poll_many(10, timeout=1)] == ["held:0", "after"]


def test_opening_the_topic_again_in_this_process_leaves_a_writer_its_lock(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Polling `end_offsets` (a bench, the console) while a producer of the same process
    writes must not take the lock from the producer and recover the partition each time."""
    from twainmq import partition

    tmq.create_topic("t", partitions=1)
    producer = tmq.producer("t")
    recovered: list[int] = []
    recover = partition.PartitionLog.recover
    monkeypatch.setattr(
        partition.PartitionLog,
        "recover",
        lambda self, *a, **k: (recovered.append(1), recover(self, *a, **k))[1],
    )
    taken: list[int] = []
    take = partition.PartitionLog._take_lazily
    monkeypatch.setattr(
        partition.PartitionLog, "_take_lazily", lambda self: (taken.append(1), take(self))[1]
    )
    for number in range(200):
        producer.write_message(1, str(number))
        assert tmq.end_offsets("t") == {0: number + 1}
    producer.close()
    # Once per write without the guard. The producer takes the lock again, and an open
    # recovers, only after the idle releaser freed it (a thread stalled for a tick or more).
    assert len(taken) < 20
    assert len(recovered) < 20
