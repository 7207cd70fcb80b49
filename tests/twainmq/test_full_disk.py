"""A full disk, for real (a small tmpfs, ``tests/full_disk.py``): writes the disk refuses are
never acknowledged, leave nothing behind, and the same producer goes on once space is freed.

Each test writes uniquely numbered messages until the disk refuses, frees the space (deletes
the filler it wrote first), carries on, and reads everything back: every acknowledged message
exactly once, in order, none torn, and ``twainmq check`` finds nothing wrong.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.full_disk import MIB, fill, free_bytes, small_disk
from twainmq import StorageFullError, Twain
from twainmq.encoding import HEAD_CHECK, HEAD_CHECK_AT
from twainmq.partition import check_head
from twainmq.verify import check_topic

SEGMENT = "00000000000000000000.log"


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_disk() as directory:
        yield directory


def text(n: int) -> str:
    return f"message {n}"


def read_all(tmq: Twain, topic: str) -> dict[int, list[str]]:
    """Partition -> its messages, read from the start by a fresh consumer."""
    consumer = tmq.consumer(topic)
    got: dict[int, list[str]] = {}
    try:
        while (message := consumer.poll(timeout=0)) is not None:
            got.setdefault(message.partition, []).append(message.message)
    finally:
        consumer.close()
    return got


def assert_checks_clean(tmq: Twain, topic: str) -> None:
    problems = [
        str(problem)
        for partition in check_topic(tmq.root_dir, tmq.topic_config(topic))
        for problem in partition.problems
    ]
    assert problems == []


def committed_end(partition_directory: Path) -> int:
    """The committed end position the head stores (read without opening the partition)."""
    page = (partition_directory / "head").read_bytes()[: HEAD_CHECK_AT + HEAD_CHECK.size]
    fields, _ = check_head(page)
    assert fields is not None
    return fields[1]


def test_single_writes_on_a_full_disk_are_refused_then_go_on_after_space_is_freed(
    disk: Path,
) -> None:
    filler = fill(disk / "filler", leave=MIB)
    tmq = Twain(disk / "store")
    tmq.create_topic("t", partitions=1)
    producer = tmq.producer("t")
    acked: list[int] = []
    n = 0
    with pytest.raises(StorageFullError) as refused:
        while True:
            assert producer.write_message(n % 65536, text(n)).offset == len(acked)
            acked.append(n)
            n += 1
    error = refused.value
    assert error.retriable and error.errno == errno.ENOSPC and isinstance(error, OSError)
    assert SEGMENT in str(error) and str(disk) in error.path
    partition = disk / "store" / "t" / "0"
    for _ in range(3):  # still full: refused again, and nothing of it kept
        with pytest.raises(StorageFullError):
            producer.write_message(n % 65536, text(n))
        assert (partition / SEGMENT).stat().st_size == committed_end(partition)
    assert tmq.end_offsets("t") == {0: len(acked)}
    filler.unlink()
    for _ in range(1000):  # the same producer, the same message first
        assert producer.write_message(n % 65536, text(n)).offset == len(acked)
        acked.append(n)
        n += 1
    producer.close()
    assert read_all(tmq, "t") == {0: [text(i) for i in acked]}
    assert_checks_clean(tmq, "t")
    done = subprocess.run(
        [sys.executable, "-m", "twainmq", "--root", str(disk / "store"), "check", "t"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_batches_on_a_full_disk_lose_nothing_acknowledged(disk: Path) -> None:
    filler = fill(disk / "filler", leave=MIB)
    tmq = Twain(disk / "store")
    tmq.create_topic("t", partitions=4, key_type="u32")
    producer = tmq.producer("t")
    acked: list[int] = []
    refused = 0
    n = 0
    while refused < 3:
        batch = list(range(n, n + 300))
        try:
            landed = producer.write_messages([(i, text(i)) for i in batch])
        except StorageFullError as error:
            assert error.retriable
            refused += 1
            continue  # the same batch again (still full: refused again)
        assert sum(len(r) for runs in landed.values() for r in runs) == len(batch)
        acked += batch
        n += len(batch)
    filler.unlink()
    for _ in range(5):  # the batch refused last, then new ones, with the same producer
        batch = list(range(n, n + 300))
        producer.write_messages([(i, text(i)) for i in batch])
        acked += batch
        n += len(batch)
    producer.close()
    got = read_all(tmq, "t")
    numbers = [int(m.split()[1]) for messages in got.values() for m in messages]
    assert set(numbers) == set(acked)  # nothing lost
    # A refused batch's shares written before the refusal stay: only they come twice, and
    # each partition keeps the order of its writes.
    assert len(numbers) - len(set(numbers)) <= 3 * 300
    for messages in got.values():
        firsts = list(dict.fromkeys(int(m.split()[1]) for m in messages))
        assert firsts == sorted(firsts)
    assert_checks_clean(tmq, "t")


def test_a_refused_batch_leaves_no_records_for_the_next_opener_to_keep(disk: Path) -> None:
    """The whole records a refused write put before its torn one are cut off at once:
    recovery keeps whole records past the committed end (a dead writer's), so left there
    they would come back as messages that were refused."""
    filler = fill(disk / "filler", leave=64 * 1024)
    tmq = Twain(disk / "store")
    tmq.create_topic("t", partitions=1)
    producer = tmq.producer("t")
    producer.write_message(0, text(0))
    batch = [(i, text(i)) for i in range(1, 10_001)]  # about 300 KB: far more than is free
    with pytest.raises(StorageFullError, match=r"wrote [1-9][0-9]* of"):
        producer.write_messages(batch)
    partition = disk / "store" / "t" / "0"
    assert (partition / SEGMENT).stat().st_size == committed_end(partition)
    producer.close()
    filler.unlink()
    reopened = Twain(disk / "store")
    assert read_all(reopened, "t") == {0: [text(0)]}
    assert_checks_clean(reopened, "t")


def test_a_record_larger_than_the_free_space_is_cut_short_and_refused(disk: Path) -> None:
    """A short write, without mocks: a 64 KiB record with a few pages left. The disk takes
    what fits and pwrite returns less than asked; nothing of it stays, so the free pages are
    free again and smaller records still go in, at the right offsets."""
    tmq = Twain(disk / "store")
    tmq.create_topic("t", partitions=1)
    producer = tmq.producer("t")
    producer.write_message(0, text(0))
    filler = fill(disk / "filler", leave=3 * 4096)
    room = free_bytes(disk)
    with pytest.raises(StorageFullError, match=r"wrote [1-9][0-9]* of 65[0-9]{3} bytes"):
        producer.write_message(1, b"x" * 65_000)
    assert free_bytes(disk) == room  # what the disk took is given back
    assert producer.write_message(1, text(1)).offset == 1
    assert producer.write_message(2, text(2)).offset == 2
    producer.close()
    filler.unlink()
    assert read_all(tmq, "t") == {0: [text(0), text(1), text(2)]}
    assert_checks_clean(tmq, "t")


NEW_PARTITION_ON_A_FULL_DISK = textwrap.dedent(
    """
    import sys
    from twainmq import StorageFullError, Twain
    producer = Twain(sys.argv[1]).producer("t")
    try:
        producer.write_message(0, "first")
    except StorageFullError as error:
        print("refused", error.retriable)
    """
)


def test_a_partition_first_written_on_a_full_disk_refuses_and_does_not_crash(
    disk: Path,
) -> None:
    """Its head is mapped into memory: a page only ftruncate made has no storage behind it,
    and on a full disk the first store into it killed the process (SIGBUS). In a child
    process, so that the test run survives such a crash."""
    tmq = Twain(disk / "store")
    tmq.create_topic("t", partitions=1)
    filler = fill(disk / "filler", leave=300)  # a few hundred bytes: no whole page
    done = subprocess.run(
        [sys.executable, "-c", NEW_PARTITION_ON_A_FULL_DISK, str(disk / "store")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "refused True"), done.stderr
    filler.unlink()
    with tmq.producer("t") as producer:
        assert producer.write_message(0, text(0)).offset == 0
    assert read_all(tmq, "t") == {0: [text(0)]}
    assert_checks_clean(tmq, "t")


def test_commits_on_a_full_disk_are_refused_then_go_on(disk: Path) -> None:
    tmq = Twain(disk / "store")
    tmq.create_topic("t", partitions=1)
    with tmq.producer("t") as producer:
        producer.write_messages([(i, text(i)) for i in range(5000)])
    consumer = tmq.consumer("t", group="g")
    filler = fill(disk / "filler")
    read = 0
    with pytest.raises(StorageFullError) as refused:
        while True:
            assert consumer.poll(timeout=5) is not None
            read += 1
            consumer.commit()
    assert refused.value.retriable and "commits.log" in str(refused.value)
    filler.unlink()
    consumer.commit()  # the refused commit, again
    consumer.close()
    again = tmq.consumer("t", group="g")
    try:
        message = again.poll(timeout=5)
        assert message is not None and message.offset == read
    finally:
        again.close()


def test_joining_a_group_on_a_full_disk_is_refused_then_works(disk: Path) -> None:
    tmq = Twain(disk / "store")
    tmq.create_topic("t", partitions=1)
    with tmq.producer("t") as producer:
        producer.write_message(0, text(0))
    filler = fill(disk / "filler")
    with pytest.raises(StorageFullError) as refused:
        tmq.consumer("t", group="g")
    assert refused.value.retriable
    filler.unlink()
    consumer = tmq.consumer("t", group="g")
    try:
        message = consumer.poll(timeout=5)
        assert message is not None and message.message == text(0)
    finally:
        consumer.close()


KILLED_AT_THE_CUT = textwrap.dedent(
    """
    import os, signal, sys
    from twainmq import Twain
    root, acks_path = sys.argv[1:3]
    producer = Twain(root).producer("t")
    acks = os.open(acks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def killed_after_the_torn_write(frame, event, arg):
        # The disk took part of a record and pwrite said so: die before it is cut off.
        if event == "call" and frame.f_code.co_name == "_write_failed":
            os.kill(os.getpid(), signal.SIGKILL)

    sys.setprofile(killed_after_the_torn_write)
    n = 0
    while True:
        producer.write_message(n % 65536, f"message {n}")
        os.write(acks, f"{n}\\n".encode())
        n += 1
    """
)


def test_a_writer_killed_after_a_torn_write_leaves_a_log_the_next_opener_cuts_back(
    disk: Path, tmp_path: Path
) -> None:
    filler = fill(disk / "filler", leave=MIB // 2)
    tmq = Twain(disk / "store")
    tmq.create_topic("t", partitions=1)
    acks = tmp_path / "acks"
    child = subprocess.run(
        [sys.executable, "-c", KILLED_AT_THE_CUT, str(disk / "store"), str(acks)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    acked = [int(line) for line in acks.read_text().split()]
    partition = disk / "store" / "t" / "0"
    torn = (partition / SEGMENT).stat().st_size - committed_end(partition)
    assert 0 < torn < len(text(len(acked))) + 40  # part of one record past the committed end
    filler.unlink()
    assert read_all(tmq, "t") == {0: [text(i) for i in acked]}
    assert (partition / SEGMENT).stat().st_size == committed_end(partition)
    assert_checks_clean(tmq, "t")
    with tmq.producer("t") as producer:
        assert producer.write_message(0, text(len(acked))).offset == len(acked)
    assert read_all(tmq, "t") == {0: [text(i) for i in [*acked, len(acked)]]}


def test_storage_errors_are_retriable_oserrors_naming_file_and_errno() -> None:
    from twainmq.errors import StorageError, StorageIOError, raise_storage_error

    for code, kind in ((errno.ENOSPC, StorageFullError), (errno.EDQUOT, StorageFullError)):
        with pytest.raises(kind) as raised:
            try:
                raise OSError(code, os.strerror(code))
            except OSError as error:
                raise_storage_error(error, "/data/x.log", "appending records")
        assert raised.value.errno == code and raised.value.retriable
        assert str(raised.value).startswith("/data/x.log: appending records failed (E")
    with pytest.raises(StorageIOError, match="EIO") as raised_io:
        try:
            raise OSError(errno.EIO, "I/O error")
        except OSError as error:
            raise_storage_error(error, "/data/x.log", "syncing")
    assert isinstance(raised_io.value, StorageError) and raised_io.value.retriable
    with pytest.raises(PermissionError):  # any other errno: as it was
        try:
            raise PermissionError(errno.EACCES, "denied")
        except OSError as error:
            raise_storage_error(error, "/data/x.log", "writing")
