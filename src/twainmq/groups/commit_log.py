"""The group commit log on disk: lock-free reads, appends that never wait for each other,
group sync, compaction.

Format, torn records and replay rules: ``commit_log_format``. Why one log per group and not a
file per partition: docs/design.md, "Group commits".

An append (one commit call, any number of partitions) is::

    flock(commits.log, LOCK_SH)   shared: appenders never exclude each other, only compaction
      fstat: still linked?        if compaction replaced the file, reopen the new one
      write(O_APPEND) record      one write: the commit is atomic (a torn record never counts)
      raise the header's end      pread + pwrite of 32 bytes (a lower bound: races only lower it)
    unlock
    fsync="always": group sync    one fdatasync covers every record appended before it
    past 256 KiB: compaction      try LOCK_EX (never waits): replay, write one record, replace

So a member frozen (SIGSTOP) in the middle of a commit blocks no one; a member frozen while
compacting (milliseconds, once per ~10k commits) holds the others' commits until it resumes
or dies. Readers take no lock: they read the file whole (compaction keeps it small).

A write the disk refuses (ENOSPC, EDQUOT, EIO, or a short write) fails the commit with
``StorageFullError``/``StorageIOError`` (retriable). A short write leaves a torn record,
which replay skips like a killed writer's; it is not cut off, since other appenders may have
appended after it (appends take only a shared lock).
"""

from __future__ import annotations

import fcntl
import os
import threading

from twainmq.atomic_files import fsync_directory, write_file_atomically
from twainmq.errors import raise_storage_error, short_write
from twainmq.groups.commit_log_format import (
    HEADER_BYTES,
    Entry,
    LogFormatError,
    Table,
    decode_header,
    encode_header,
    encode_record,
    replay,
    snapshot_entries,
)
from twainmq.groups.errors import GroupFileCorruptError
from twainmq.groups.layout import GroupPaths

FSYNC_MODES = ("never", "always", "batch")
COMPACT_BYTES = 256 * 1024
BATCH_INTERVAL = 0.01
_READ_ATTEMPTS = 5


def read_log(paths: GroupPaths) -> Table | None:
    """Every partition's latest (epoch, offset), or None if the group has no commit log.

    Lock-free. Raises GroupFileCorruptError naming the log if it is damaged.
    """
    for attempt in range(_READ_ATTEMPTS):
        try:
            with open(paths.commit_log, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return None
        table: Table = {}
        try:
            end, _ = decode_header(data)
            replay(data, HEADER_BYTES, end, table)
            return table
        except LogFormatError as exc:
            # A header being rewritten can be read half old, half new: look again.
            if exc.position == 0 and attempt + 1 < _READ_ATTEMPTS and len(data) >= HEADER_BYTES:
                continue
            raise _damaged(paths, exc) from None
    raise AssertionError("unreachable")


def salvage_log(paths: GroupPaths) -> Table:
    """What the valid records at the start of a (damaged) log say; for repairs only."""
    try:
        data = paths.commit_log.read_bytes()
    except FileNotFoundError:
        return {}
    table: Table = {}
    try:
        replay(data, HEADER_BYTES, HEADER_BYTES, table)
    except LogFormatError:
        pass
    return table


def create_log(paths: GroupPaths, entries: list[Entry], replace: bool = False) -> None:
    """Write a log holding one record of ``entries``, always fsynced. Without ``replace`` it is
    created exclusively: FileExistsError if the group has one already."""
    record = encode_record(entries)
    end = HEADER_BYTES + len(record)
    data = encode_header(end, end) + record
    paths.directory.mkdir(parents=True, exist_ok=True)
    write_file_atomically(paths.commit_log, data, fsync=True, exclusive=not replace)


class CommitLog:
    """One member's (or admin call's) handle for appending to its group's commit log."""

    def __init__(self, paths: GroupPaths, fsync: str = "never") -> None:
        if fsync not in FSYNC_MODES:
            raise ValueError(f"fsync {fsync!r} must be one of {', '.join(FSYNC_MODES)}")
        self._paths = paths
        self._fsync = fsync
        self._fd: int | None = None  # O_APPEND: records (and the locks)
        self._header_fd: int | None = None  # the same file without O_APPEND (Linux's pwrite
        # on an O_APPEND descriptor appends, whatever the position)
        self._thread_lock = threading.Lock()
        self._last: tuple[tuple[int, int], int] | None = None  # (file, end) of our last append
        self._compact_at = 0  # the log size worth compacting, once a replay told us

    def append(self, entries: list[Entry]) -> None:
        """Append one record of ``entries``; returns once it is as durable as the log's
        ``fsync`` mode says. Raises GroupFileCorruptError if the log is missing."""
        if not entries:
            return
        record = encode_record(entries)
        with self._thread_lock:
            fd, key = self._locked_fd()
            try:
                _write_all(fd, record, self._paths)
                end = os.lseek(fd, 0, os.SEEK_CUR)
                assert self._header_fd is not None
                _raise_header(self._header_fd, end, None, self._paths)
            except OSError as error:
                raise_storage_error(error, self._paths.commit_log, "appending a commit")
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            self._last = (key, end)
        if self._fsync == "always":
            _syncer(key).sync(self._paths, end)
        elif self._fsync == "batch":
            _syncer(key).sync_later(self._paths, end)
        if end > max(COMPACT_BYTES, self._compact_at):
            self._compact_if_large()

    def close(self) -> None:
        """Let go of the file; with ``fsync="batch"``, sync what is not synced yet first."""
        with self._thread_lock:
            last, self._last = self._last, None
            self._close_files()
        if last is not None and self._fsync == "batch":
            _syncer(last[0]).sync(self._paths, last[1])

    def _close_files(self) -> None:
        for fd in (self._fd, self._header_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._header_fd = None

    def _locked_fd(self) -> tuple[int, tuple[int, int]]:
        """Our descriptor of the current log, holding a shared lock on it, and the file's
        (device, inode)."""
        while True:
            if self._fd is None:
                self._open()
            assert self._fd is not None
            fcntl.flock(self._fd, fcntl.LOCK_SH)
            stat = os.fstat(self._fd)
            if stat.st_nlink > 0:
                return self._fd, (stat.st_dev, stat.st_ino)
            self._close_files()  # compacted (replaced) meanwhile: append to the new log

    def _open(self) -> None:
        path = self._paths.commit_log
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            raise GroupFileCorruptError(
                self._paths.topic, self._paths.group, path, "missing"
            ) from None
        try:
            self._header_fd = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
        except FileNotFoundError:  # no /proc: the path (a replace in between is caught by
            self._header_fd = os.open(path, os.O_RDWR)  # the nlink check of the next append)
        self._fd = fd

    def _compact_if_large(self) -> None:
        with self._thread_lock:
            fd = self._fd
            if fd is None:
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # an appender (or another compactor) is at work: a later append retries
            try:
                self._compact(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _compact(self, fd: int) -> None:
        """Replace the log with one record of every partition's latest entry (holding the
        exclusive lock: no append is under way, so a torn tail is a dead writer's)."""
        stat = os.fstat(fd)
        if stat.st_nlink == 0:
            return  # compacted by someone else already
        data = os.pread(fd, stat.st_size, 0)
        table: Table = {}
        try:
            replay(data, HEADER_BYTES, decode_header(data)[0], table)
        except LogFormatError:
            return  # damage: readers report it naming the file; this commit itself is done
        self._compact_at = 16 * (HEADER_BYTES + 16 + 16 * len(table))
        if len(data) > max(COMPACT_BYTES, self._compact_at):
            create_log(self._paths, snapshot_entries(table), replace=True)


class _Syncer:
    """Group commit for one log file (inode) in this process: one fdatasync covers every
    record appended before it, whichever member or thread appended it."""

    def __init__(self, key: tuple[int, int]) -> None:
        self._key = key
        self._condition = threading.Condition()
        self._appended = 0
        self._synced = 0
        self._syncing = False
        self._batch_thread: threading.Thread | None = None
        self.error: OSError | None = None

    def sync(self, paths: GroupPaths, end: int) -> None:
        """Return once every byte of the log before ``end`` is on disk."""
        with self._condition:
            self._appended = max(self._appended, end)
            while self._synced < end:
                if self._syncing:
                    self._condition.wait()
                    continue
                self._lead(paths)

    def sync_later(self, paths: GroupPaths, end: int) -> None:
        """``fsync="batch"``: a background thread syncs within ``BATCH_INTERVAL``; a failed
        background sync is raised here, by the next commit of this process."""
        with self._condition:
            error, self.error = self.error, None
            if error is not None:
                raise error
            self._appended = max(self._appended, end)
            if self._batch_thread is None:
                self._batch_thread = threading.Thread(
                    target=self._run_batches, args=(paths,), name="twainmq-commit-sync", daemon=True
                )
                self._batch_thread.start()

    def _run_batches(self, paths: GroupPaths) -> None:
        while True:
            threading.Event().wait(BATCH_INTERVAL)
            with self._condition:
                try:
                    while self._synced < self._appended:
                        if self._syncing:
                            self._condition.wait()
                        else:
                            self._lead(paths)
                except OSError as exc:  # reported by the next commit of this process
                    self.error = exc
                if self._synced >= self._appended:
                    self._batch_thread = None
                    return

    def _lead(self, paths: GroupPaths) -> None:
        """Sync for everyone waiting (called with the condition held; releases it meanwhile)."""
        self._syncing = True
        target = self._appended
        self._condition.release()
        try:
            _sync_log(paths, self._key, target)
        finally:
            self._condition.acquire()
            self._syncing = False
            self._condition.notify_all()
        self._synced = max(self._synced, target)


def _sync_log(paths: GroupPaths, key: tuple[int, int], target: int) -> None:
    """Make the log's bytes before ``target`` durable, then say so in its header."""
    try:
        fd = os.open(paths.commit_log, os.O_RDWR)
    except FileNotFoundError:
        return  # deleted with its topic
    try:
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != key:
            # Compacted since our append: the new log holds our entries and was fsynced
            # before its rename, whose own sync may still be under way: make sure of it.
            fsync_directory(paths.directory)
            return
        header = os.pread(fd, HEADER_BYTES, 0)
        try:
            if decode_header(header)[1] >= target:
                return  # another process synced past our records already
        except LogFormatError:
            pass  # a header being rewritten, or damage a reader reports: sync anyway
        os.fdatasync(fd)
        _raise_header(fd, target, target, paths)
    except OSError as error:
        raise_storage_error(error, paths.commit_log, "syncing commits")
    finally:
        os.close(fd)


def _raise_header(fd: int, end: int, synced: int | None, paths: GroupPaths) -> None:
    """Raise the header's end (and synced) to at least the given positions. Not locked: two
    writers racing can leave the smaller of their values, still a true lower bound."""
    try:
        old_end, old_synced = decode_header(os.pread(fd, HEADER_BYTES, 0))
    except LogFormatError:
        return  # a header being rewritten by another writer, or damage readers report
    new_synced = old_synced if synced is None else max(old_synced, synced)
    if end > old_end or new_synced > old_synced:
        header = encode_header(max(old_end, end), new_synced)
        written = os.pwrite(fd, header, 0)  # in place: only a failing disk cuts it short
        if written != len(header):
            raise short_write(paths.commit_log, "raising the header", written, len(header))


_syncers: dict[tuple[int, int], _Syncer] = {}
_syncers_lock = threading.Lock()


def _syncer(key: tuple[int, int]) -> _Syncer:
    with _syncers_lock:
        found = _syncers.get(key)
        if found is None:
            if len(_syncers) > 256:  # logs compacted long ago: their inodes are gone
                _syncers.clear()
            found = _syncers[key] = _Syncer(key)
        return found


def _write_all(fd: int, data: bytes, paths: GroupPaths) -> None:
    # A short write (full disk) leaves a torn record that readers skip; the rest goes after
    # it as its own bytes would not parse: fail instead of writing half a commit twice.
    written = os.write(fd, data)
    if written != len(data):
        raise short_write(paths.commit_log, "appending a commit", written, len(data))


def _damaged(paths: GroupPaths, exc: LogFormatError) -> GroupFileCorruptError:
    reason = f"{exc.reason} (at byte {exc.position})" if exc.position else exc.reason
    return GroupFileCorruptError(paths.topic, paths.group, paths.commit_log, reason)
