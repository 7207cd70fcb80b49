"""How many times each ``fsync=`` mode really syncs segment data, counted, not assumed.

Every ``os.fdatasync``/``os.fsync`` of the process is recorded (and still done) together with
the file it synced, the thread that called it and, for segment syncs, how many records the
partition's head had committed at that moment. That tells apart a sync that covers a write
from one that comes too early, too late or not at all:

- ``never``: no segment sync on any write (only an explicit ``flush()`` syncs);
- ``always``: exactly one sync per write call, made before the head moves (so before the
  write is acknowledged or visible to readers);
- ``batch``: writers never sync; the batcher's thread or ``flush()``/``close()`` sync each
  dirty partition once, covering every write made before, so fewer syncs than writes.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.sync_log import SyncLog, record_syncs
from twainmq import Twain
from twainmq.producer import Producer


@pytest.fixture
def sync_log(monkeypatch: pytest.MonkeyPatch) -> SyncLog:
    return record_syncs(monkeypatch)


def one_partition(tmq: Twain, **config: int) -> None:
    tmq.create_topic("t", partitions=1, **config)


def watch_head(sync_log: SyncLog, producer: Producer) -> None:
    """Let each recorded segment sync note how many records the head had committed."""
    sync_log.committed = lambda: producer._topic.log(0).end_offset()


def test_never_syncs_no_segment_data_on_writes_or_close(tmq: Twain, sync_log: SyncLog) -> None:
    one_partition(tmq)
    producer = tmq.producer("t", fsync="never")
    for number in range(20):
        producer.write_message(1, f"m{number}")
    producer.write_messages([(1, "a"), (1, "b")])
    producer.close()
    assert sync_log.of_files(".log") == []


def test_always_syncs_once_per_write_before_the_head_moves(tmq: Twain, sync_log: SyncLog) -> None:
    one_partition(tmq)
    producer = tmq.producer("t", fsync="always")
    watch_head(sync_log, producer)
    offsets = [producer.write_message(1, f"m{number}").offset for number in range(10)]
    written = producer.write_messages([(1, "a"), (1, "b"), (1, "c")])
    producer.close()
    assert offsets == list(range(10)) and written == {0: [range(10, 13)]}
    syncs = sync_log.of_files(".log")
    assert len(syncs) == 11  # ten single writes and one batch
    # Each sync ran while the head still pointed before its write: durable, then visible.
    assert [s.committed for s in syncs] == [*range(10), 10]
    assert {s.thread for s in syncs} == {threading.current_thread().name}


def test_always_syncs_each_partition_a_batch_wrote_to(tmq: Twain, sync_log: SyncLog) -> None:
    tmq.create_topic("t", partitions=3)
    with tmq.producer("t", fsync="always", partitioner=lambda key, n: key % n) as producer:
        producer.write_messages([(0, "a"), (1, "b"), (0, "c")])  # partitions 0 and 1
    assert sorted(Path(s.path).parent.name for s in sync_log.of_files(".log")) == ["0", "1"]


def test_batch_writers_never_sync_and_flush_syncs_all_they_wrote_once(
    tmq: Twain, sync_log: SyncLog
) -> None:
    one_partition(tmq)
    producer = tmq.producer("t", fsync="batch", batch_interval=3600)  # the thread never runs
    watch_head(sync_log, producer)
    for number in range(30):
        producer.write_message(1, f"m{number}")
    producer.write_messages([(1, "a"), (1, "b")])
    assert sync_log.of_files(".log") == []  # a writer never waits for the disk
    producer.flush()
    (flushed,) = sync_log.of_files(".log")
    assert flushed.committed == 32  # after every write: it covers them all
    producer.write_message(1, "last")
    producer.close()
    synced = sync_log.of_files(".log")
    assert len(synced) == 2 and synced[-1].committed == 33  # close synced the last write


def test_batch_syncs_are_shared_by_writes_and_made_by_the_batcher_thread(
    tmq: Twain, sync_log: SyncLog
) -> None:
    one_partition(tmq)
    producer = tmq.producer("t", fsync="batch", batch_interval=0.001)
    watch_head(sync_log, producer)
    writes = 200
    for number in range(writes):
        producer.write_message(1, f"m{number}")
    deadline = time.monotonic() + 60
    while not any(s.committed == writes for s in sync_log.of_files(".log")):
        assert time.monotonic() < deadline, "the batcher never synced the last write"
        time.sleep(0.001)
    background = sync_log.of_files(".log")
    producer.close()
    assert {s.thread for s in background} == {"twainmq-fsync-batch"}
    assert 1 <= len(background) < writes  # one sync covered many writes


def test_a_roll_syncs_the_sealed_segment_and_the_directory_unless_never(
    tmq: Twain, sync_log: SyncLog
) -> None:
    tmq.create_topic("never", partitions=1, segment_bytes=1024)
    tmq.create_topic("batch", partitions=1, segment_bytes=1024)
    created = len(sync_log.syncs)  # creating topics syncs their config files
    for topic in ("never", "batch"):
        with tmq.producer(topic, fsync=topic, batch_interval=3600) as producer:
            for number in range(30):  # 30 x ~60 bytes: past 1024, so one roll at least
                producer.write_message(1, f"{number:050d}")
        if topic == "never":
            assert sync_log.syncs[created:] == []
    rolled = tmq.root_dir / "batch" / "0"
    sealed = {s.path for s in sync_log.of_files(".log") if s.call == "fsync"}
    assert sealed and all(Path(p).parent == rolled for p in sealed)
    assert str(rolled) in {s.path for s in sync_log.of_directories()}


def test_a_failed_sync_is_not_hidden(tmq: Twain, monkeypatch: pytest.MonkeyPatch) -> None:
    """``always`` raises a sync that failed instead of acknowledging the write.

    (The unsynced record stays past the committed end; like a writer killed there, recovery
    may keep it, see "Recovery" in docs/design.md.)
    """
    one_partition(tmq)
    producer = tmq.producer("t", fsync="always")
    producer.write_message(1, "ok")

    def failing(fd: int) -> None:
        raise OSError(5, "simulated disk error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(OSError, match="simulated disk error"):
        producer.write_message(1, "lost")
    monkeypatch.undo()
    assert producer._topic.log(0).end_offset() == 1  # the head did not move past it
    producer.close()
