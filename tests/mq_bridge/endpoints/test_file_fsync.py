"""The `file` output's `fsync` policies, counted: how many syncs of the file, and when.

Each sync of the output file is recorded with the file's size at that moment, so a test can
tell a sync that covers a write (made after it, before the call returned) from one that is
missing or early. See the options in ``mq_bridge.endpoints.file``:

    off       never syncs
    batch     syncs every write: one per batch, one per buffer of single sends
    periodic  syncs at most every fsync_interval_ms, and on flush/close
    always    syncs every send, single ones too, before it returns
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mq_bridge.message import Message
from tests.mq_bridge.endpoints.test_file import messages, payloads, reader, writer
from tests.sync_log import SyncLog, record_syncs

HOUR_MS = 3_600_000


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "out.log"


@pytest.fixture
def sync_log(monkeypatch: pytest.MonkeyPatch, path: Path) -> SyncLog:
    log = record_syncs(monkeypatch)
    log.watch_suffix = path.name
    log.committed = lambda: path.stat().st_size  # bytes in the file when it was synced
    return log


def synced_sizes(sync_log: SyncLog, path: Path) -> list[int | None]:
    return [s.committed for s in sync_log.of_files(path.name)]


def read_back(path: Path) -> list[bytes]:
    source = reader(path)
    try:
        return payloads(source)
    finally:
        source.close()


def size(path: Path) -> int:
    return path.stat().st_size


def test_off_never_syncs(path: Path, sync_log: SyncLog) -> None:
    output = writer(path, fsync="off", linger_ms=0)
    output.send(messages(b"a", b"b"))
    output.send_one(Message(b"c"))
    output.flush()
    output.close()
    assert synced_sizes(sync_log, path) == []
    assert read_back(path) == [b"a", b"b", b"c"]


def test_always_syncs_every_send_before_it_returns(path: Path, sync_log: SyncLog) -> None:
    output = writer(path, fsync="always", linger_ms=60_000)  # always ignores the linger
    after: list[int] = []
    output.send(messages(b"a", b"b"))
    after.append(size(path))
    for payload in (b"c", b"d"):
        output.send_one(Message(payload))
        after.append(size(path))
    output.flush()
    output.close()
    assert synced_sizes(sync_log, path) == after  # one sync per send, covering it


def test_batch_syncs_each_write_so_buffered_single_sends_share_one(
    path: Path, sync_log: SyncLog
) -> None:
    output = writer(path, fsync="batch", linger_ms=60_000)
    for number in range(5):
        output.send_one(Message(str(number).encode()))
    assert synced_sizes(sync_log, path) == []  # buffered, not yet written
    output.send(messages(b"batch"))  # writes the buffer and the batch at once
    first = size(path)
    assert synced_sizes(sync_log, path) == [first]
    output.send_one(Message(b"late"))
    output.flush()  # writes the buffer, then syncs it
    assert synced_sizes(sync_log, path) == [first, size(path)]
    output.close()
    assert len(synced_sizes(sync_log, path)) == 2  # close had nothing left to sync
    assert len(read_back(path)) == 7


def test_periodic_syncs_only_when_due_and_on_flush_and_close(path: Path, sync_log: SyncLog) -> None:
    output = writer(path, fsync="periodic", fsync_interval_ms=HOUR_MS, linger_ms=0)
    for number in range(5):
        output.send(messages(str(number).encode()))
    assert synced_sizes(sync_log, path) == []  # not due within the hour
    output.flush()
    assert synced_sizes(sync_log, path) == [size(path)]
    output.send_one(Message(b"after"))
    assert len(synced_sizes(sync_log, path)) == 1
    output.close()
    assert synced_sizes(sync_log, path)[1:] == [size(path)]


def test_periodic_with_a_zero_interval_syncs_every_write(path: Path, sync_log: SyncLog) -> None:
    output = writer(path, fsync="periodic", fsync_interval_ms=0, linger_ms=0)
    after = []
    for number in range(3):
        output.send(messages(str(number).encode()))
        after.append(size(path))
    output.close()
    assert synced_sizes(sync_log, path) == after
