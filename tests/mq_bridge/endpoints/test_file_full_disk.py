"""The `file` output on a full disk, for real (a small tmpfs, ``tests/full_disk.py``).

A send the disk refuses (or cuts short) raises a retriable `FileStorageError` and leaves
nothing in the file: the next send never glues onto a fragment. Each test sends uniquely
numbered messages until the disk refuses, frees the space, carries on with the same publisher
and reads the file back: every acknowledged message exactly once, in order, none torn.
"""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.endpoints.file.output import FileStorageError
from mq_bridge.errors import is_retriable
from tests.full_disk import MIB, fill, free_bytes, small_disk


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_disk() as directory:
        yield directory


def message(n: int) -> Message:
    return Message(f"payload of message {n} ".encode() * (1 + n % 5), {"n": str(n)})


def read_all(path: Path) -> list[int]:
    """The numbers of the records in the file, each checked whole."""
    numbers: list[int] = []
    with Consumer.from_config({"file": {"path": str(path), "mode": "consume"}}) as consumer:
        while not consumer.exhausted:
            for got in consumer.poll(max=1000, timeout_ms=1000):
                n = int(got.metadata["n"])
                assert (got.payload, got.metadata) == (message(n).payload, {"n": str(n)})
                numbers.append(n)
            consumer.commit()
    return numbers


def assert_refused(error: BaseException, path: Path) -> None:
    assert isinstance(error, FileStorageError) and isinstance(error, OSError)
    assert is_retriable(error) and error.errno == errno.ENOSPC and str(path) in str(error)


def test_batches_on_a_full_disk_are_refused_whole_then_go_on(disk: Path) -> None:
    filler = fill(disk / "filler", leave=MIB)
    path = disk / "out.jsonl"
    acked: list[int] = []
    n = 0
    with Publisher.from_config({"file": {"path": str(path)}}) as publisher:
        for refused in range(3):
            size = path.stat().st_size if path.exists() else 0
            with pytest.raises(FileStorageError) as raised:
                while True:
                    publisher.send_batch([message(i) for i in range(n, n + 50)])
                    acked += range(n, n + 50)
                    n += 50
            assert_refused(raised.value, path)
            if refused:  # still full: the same batch refused again, nothing of it kept
                assert path.stat().st_size == size
            assert path.read_bytes().endswith(b"\n")
        filler.unlink()
        for _ in range(10):  # the refused batch first, with the same publisher
            publisher.send_batch([message(i) for i in range(n, n + 50)])
            acked += range(n, n + 50)
            n += 50
    assert read_all(path) == acked


def test_single_sends_on_a_full_disk_are_refused_then_go_on(disk: Path) -> None:
    filler = fill(disk / "filler", leave=MIB // 2)
    path = disk / "out.jsonl"
    acked: list[int] = []
    n = 0
    with Publisher.from_config({"file": {"path": str(path)}}) as publisher:
        with pytest.raises(FileStorageError) as raised:
            while True:
                publisher.send(message(n))
                acked.append(n)
                n += 1
        assert_refused(raised.value, path)
        assert path.read_bytes().endswith(b"\n")
        filler.unlink()
        for _ in range(100):
            publisher.send(message(n))
            acked.append(n)
            n += 1
    assert read_all(path) == acked


def test_a_send_larger_than_the_free_space_is_cut_short_and_taken_back(disk: Path) -> None:
    """A short write, without mocks: the disk takes what fits of a 200 KB batch and write()
    returns less than asked. The file is cut back to where that send began, so the pages it
    took are free again and smaller sends still go in."""
    path = disk / "out.jsonl"
    with Publisher.from_config({"file": {"path": str(path)}}) as publisher:
        publisher.send(message(0))
        filler = fill(disk / "filler", leave=4 * 4096)
        room, size = free_bytes(disk), path.stat().st_size
        big = [Message(b"x" * 1000, {"n": str(i)}) for i in range(200)]
        with pytest.raises(FileStorageError, match=r"wrote [1-9][0-9]* of 2[0-9]{5} bytes"):
            publisher.send_batch(big)
        assert (path.stat().st_size, free_bytes(disk)) == (size, room)
        publisher.send(message(1))
        filler.unlink()
        publisher.send(message(2))
    assert read_all(path) == [0, 1, 2]


def test_buffered_single_sends_stay_buffered_while_the_disk_is_full(disk: Path) -> None:
    """linger_ms: a background write the disk refuses keeps its records (their senders were
    told they are buffered); the next send raises the refusal once, and once space is freed
    every send that returned is in the file, once."""
    filler = fill(disk / "filler", leave=MIB // 2)
    path = disk / "out.jsonl"
    acked: list[int] = []
    refusals = 0
    n = 0
    with Publisher.from_config({"file": {"path": str(path), "linger_ms": 1}}) as publisher:
        while refusals < 3:
            try:
                publisher.send(message(n))
            except FileStorageError as error:
                assert_refused(error, path)
                refusals += 1
                continue
            acked.append(n)
            n += 1
        filler.unlink()
        for _ in range(100):
            while True:
                try:
                    publisher.send(message(n))
                    break
                except FileStorageError:  # a refusal reported before space was freed
                    pass
            acked.append(n)
            n += 1
    assert read_all(path) == acked  # closing wrote what was still buffered


KILLED_AT_THE_CUT = textwrap.dedent(
    """
    import os, signal, sys
    from mq_bridge import Message, Publisher

    def killed_after_the_torn_write(frame, event, arg):
        # The disk took part of a send and write() said so: die before it is taken back.
        if event == "call" and frame.f_code.co_name == "_take_back":
            os.kill(os.getpid(), signal.SIGKILL)

    publisher = Publisher.from_config({"file": {"path": sys.argv[1]}})
    sys.setprofile(killed_after_the_torn_write)
    n = 0
    while True:
        batch = [Message(f"payload of message {i} ".encode() * (1 + i % 5), {"n": str(i)})
                 for i in range(n, n + 50)]
        publisher.send_batch(batch)
        n += 50
        print(n, flush=True)  # everything below n is acknowledged
    """
)


def test_a_writer_killed_after_a_torn_write_leaves_a_file_the_next_opener_repairs(
    disk: Path,
) -> None:
    filler = fill(disk / "filler", leave=MIB // 2)
    path = disk / "out.jsonl"
    child = subprocess.run(
        [sys.executable, "-c", KILLED_AT_THE_CUT, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    acked = int(child.stdout.split()[-1])
    assert not path.read_bytes().endswith(b"\n")  # the torn send's fragment
    with pytest.raises(FileStorageError):  # still full: the fragment cannot be ended yet
        Publisher.from_config({"file": {"path": str(path)}}).send(message(acked))
    filler.unlink()
    with Publisher.from_config({"file": {"path": str(path)}}) as publisher:
        for n in range(acked, acked + 100):
            publisher.send(message(n))
    # The torn send's whole records stay (its caller never heard back: at least once); its
    # torn last record is ended, so it does not decode (skipped, logged); the first send
    # after it is whole.
    got = read_all(path)
    kept = got[acked:-100]
    assert kept == list(range(acked, acked + len(kept))) and len(kept) < 50
    assert got[:acked] + got[-100:] == list(range(acked + 100))
