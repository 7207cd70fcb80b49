"""One partition on disk: its head, its lock, and appending records.

Locking and durability (see docs/design.md, "Storage engine"):

- The ``head`` file of a partition is both its lock (``flock``) and its commit point: a
  memory-mapped record of (active segment, committed end position, next offset, index state).
- A writer takes the lock, reads the head, ``pwrite``s its records at the committed end,
  and updates the head; it gives the lock back lazily (below). Bytes past the committed end
  are never read and are overwritten by the next writer, so a writer killed mid-write leaves
  nothing visible.
- Readers take no lock: they read the head from the shared mapping and never read past the
  committed end.
- ``fsync="always"`` syncs the segment before the head moves; ``"batch"`` marks the partition
  dirty for the producer's background sync (``fsync_batcher.py``); ``"never"`` leaves it to
  the kernel, which is safe against a process crash because the data is in the page cache
  when the call returns.
- Lazy release: a writer keeps the lock between its writes (two syscalls saved a write). A
  writer that finds it busy sets the head's "wanted" byte and polls; the holder checks that
  byte after each write and releases when it is set; ``idle_release.py`` releases a lock not
  used for a tick (1-16 ms). Mutual exclusion rests on ``flock`` alone.
- An exclusive producer ``hold()``s the lock from its first write until it closes.
- A write the disk refuses (an ``OSError``, or ``pwrite`` writing less than asked: a full
  disk) is never acknowledged: the head does not move, what it left past the committed end
  is cut off at once (ftruncate; failing that, before this object's next write, or by
  recovery), and it raises ``StorageFullError``/``StorageIOError`` (retriable). The check
  on the success path is one compare of ``pwrite``'s result.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import struct
import threading
import time
from pathlib import Path
from typing import NoReturn

from .atomic_files import fsync_directory, write_file_atomically
from .config import TopicConfig
from .encoding import (
    HEAD_CHECK,
    HEAD_CHECK_AT,
    HEAD_MAGIC,
    HEAD_SEALED,
    INDEX_MAGIC,
    LEGACY_HEAD_MAGIC,
    head_crc,
    index_seed,
    pack_index_entry,
)
from .errors import PartitionLockedError, raise_storage_error, short_write
from .idle_release import RELEASER
from .recovery import recover_partition
from .retention import apply_retention
from .segments import index_path, segment_path

HEAD_FIELDS = struct.Struct("<qqqqq")  # segment_base, end, next_offset, index_bytes, next_index
END_AND_NEXT = struct.Struct("<qq")
# Lock-free readers (head()) rely on the order of the head's stores: see head() and _publish.
_BASE = struct.Struct("<q")
_BASE_END_NEXT = struct.Struct("<qqq")
_AFTER_BASE = struct.Struct("<qqqq")  # end, next_offset, index_bytes, next_index
_FIELDS_AT = len(HEAD_MAGIC)
_END_AT = _FIELDS_AT + 8
FSYNC_MODES = ("never", "batch", "always")
_FIRST = [0]
# Bound once: the single-write path runs these per message.
_flock, _pwrite = fcntl.flock, os.pwrite
_LOCK_EX, _LOCK_UN = fcntl.LOCK_EX, fcntl.LOCK_UN
_LOCK_NOW = fcntl.LOCK_EX | fcntl.LOCK_NB
# A byte of the head page past the head fields: set by a writer waiting for the lock, cleared
# by the one that takes it. Only tells a lazy holder to let go; exclusion is flock's job.
_WANTED = 64
_POLL_FIRST, _POLL_MAX = 20e-6, 0.002  # seconds between a waiter's tries (doubling)
# Heads (st_dev, st_ino) whose lock a producer in this process holds for its lifetime
# (exclusive=True): waiting for one of them from this process would never end.
_HELD_HERE: set[tuple[int, int]] = set()
# Heads whose lock a PartitionLog of this process holds lazily: a waiter here asks it directly.
_LAZY_HERE: dict[tuple[int, int], PartitionLog] = {}
_pack_end_and_next = END_AND_NEXT.pack_into
_SEALED_AT = HEAD_CHECK_AT + 4
_UNSEALED = bytes(4)
_SEALED = struct.pack("<I", HEAD_SEALED)
HeadFields = tuple[int, int, int, int, int]


class PartitionLog:
    """The files of one partition, opened for reading and appending."""

    def __init__(self, directory: Path, config: TopicConfig, partition: int) -> None:
        self.directory = directory
        self.config = config
        self.partition = partition
        self._segment_bytes = config.segment_bytes
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._head_fd = _open_head(directory / "head")
        except OSError as error:
            raise_storage_error(error, directory / "head", "creating the head")
        stat = os.fstat(self._head_fd)
        self._identity = (stat.st_dev, stat.st_ino)
        self._held = False  # exclusive: keep the lock until close()
        self._locked = False  # this object holds the flock (exclusively or lazily)
        self.used = False  # written since the idle releaser's last look
        # flock excludes other open files, not other threads using this one: they queue here.
        self._threads = threading.Lock()
        self.dirty = False  # written since the last sync (fsync="batch"; see fsync_batcher.py)
        self._ensure_head_size()
        self._head = mmap.mmap(self._head_fd, mmap.PAGESIZE)
        self._segment_base = -1
        self._segment_fd = -1
        self._index_fd = -1
        self._index_seed = 0
        # The head as this object last wrote it, kept while it holds the lock (no other
        # writer can move the head then): single writes need not read the mapping.
        # _known_due = -1 means "not known": read the mapping (the slow path).
        self._known_end = self._known_next = 0
        self._known_due = -1
        # A failed write whose leftovers could not be cut at once: the next write cuts them.
        self._cut_pending = False
        self._open_and_recover()

    def _open_and_recover(self) -> None:
        """Recover the partition, unless a live writer holds it (and so keeps it whole).

        A writer of this process that holds the lock lazily is alive: opening the partition
        again (a reader, ``end_offsets``, the console) must not make it give the lock back,
        as ``_try_lock`` would, nor scan the tail."""
        if self._identity in _LAZY_HERE and self.read_head_if_valid() is not None:
            return
        if not self._try_lock():
            if self.read_head_if_valid() is not None:
                return
            self._wait_for_lock()
        try:
            self.recover()
            self._seal()
        finally:
            _flock(self._head_fd, _LOCK_UN)

    def _recover_if_holder_died(self) -> None:
        """Just took the lock: every holder seals the head before it lets go, so a head left
        unsealed means its last holder died holding the lock, possibly between two stores of
        a write (the end stored, not yet the next offset): recover, as opening would, before
        writing on top of that. Otherwise only mark the head as being written."""
        if (
            self._head[_SEALED_AT : _SEALED_AT + 4] == _SEALED
            or self._head[:_FIELDS_AT] != HEAD_MAGIC
        ):
            self._unseal()
        else:
            self.recover()

    def _unseal(self) -> None:
        """Mark the head's CRC out of date: this object holds the lock and will write."""
        self._head[_SEALED_AT : _SEALED_AT + 4] = _UNSEALED

    def _seal(self) -> None:
        """Store the head's CRC, then mark it current (before letting go of the lock)."""
        if self._head[:_FIELDS_AT] == HEAD_MAGIC:
            HEAD_CHECK.pack_into(self._head, HEAD_CHECK_AT, head_crc(self._head), HEAD_SEALED)

    def _try_lock(self) -> bool:
        """Take the lock if it is free or lazily held by another writer of this process
        (which gives it up at once, as it would for a waiter). Do not wait."""
        holder = _LAZY_HERE.get(self._identity)
        if holder is not None and holder is not self:
            holder.release_on_request()
        try:
            _flock(self._head_fd, _LOCK_NOW)
        except BlockingIOError:
            return False
        return True

    def _wait_for_lock(self) -> None:
        """Take the busy lock, polling: a lazy holder only lets go when it sees the "wanted"
        byte (or idles), so a waiter must not sleep inside flock."""
        delay = _POLL_FIRST
        while True:
            if self._identity in _HELD_HERE:
                raise PartitionLockedError(
                    f"partition {self.partition} ({self.directory}) is held by an exclusive "
                    "producer in this process: close it first"
                )
            self._head[_WANTED] = 1
            try:
                _flock(self._head_fd, _LOCK_NOW)
                return
            except BlockingIOError:
                time.sleep(delay)
                delay = min(delay * 2, _POLL_MAX)

    def _take_lazily(self) -> None:
        """Take the lock and keep it after the write (call with ``self._threads`` held)."""
        self._lock()
        self._locked = True
        self._recover_if_holder_died()
        self._head[_WANTED] = 0
        _LAZY_HERE[self._identity] = self
        RELEASER.add(self)

    def _give_back(self) -> None:
        """Release the flock this object holds (call with ``self._threads`` held)."""
        self._locked = False
        self._known_due = -1  # other writers may move the head from now on
        if _LAZY_HERE.get(self._identity) is self:
            del _LAZY_HERE[self._identity]
        RELEASER.discard(self)
        self._seal()
        _flock(self._head_fd, _LOCK_UN)

    def release_if_idle(self) -> bool:
        """Release a lazily held lock not written with since the last call (idle_release);
        return whether it was written with."""
        if self.used:
            self.used = False
            return True
        if self._threads.acquire(blocking=False):
            try:
                if self._locked and not self._held and not self.used:
                    self._give_back()
            finally:
                self._threads.release()
        return False

    def release_on_request(self) -> None:
        """Release a lazily held lock now: another producer of this process waits for it."""
        if self._threads.acquire(timeout=0.01):  # else its holder is busy: poll meanwhile
            try:
                if self._locked and not self._held:
                    self._give_back()
            finally:
                self._threads.release()

    def forget_lock_after_fork(self) -> None:
        """In a forked child: the flock belongs to the parent's open file; leave it alone."""
        self._locked = self._held = False
        self._known_due = -1
        _LAZY_HERE.pop(self._identity, None)

    def hold(self) -> None:
        """Keep the partition's lock until ``release()`` (an exclusive producer)."""
        with self._threads:
            if not self._held:
                if not self._locked:
                    self._lock()
                    self._locked = True
                    self._recover_if_holder_died()
                _LAZY_HERE.pop(self._identity, None)
                RELEASER.discard(self)
                self._held = True
                _HELD_HERE.add(self._identity)

    def release(self) -> None:
        """Give back the lock, whether ``hold()`` or a lazy write took it."""
        with self._threads:
            if self._held:
                _HELD_HERE.discard(self._identity)
                self._held = False
            if self._locked:
                self._give_back()

    def _ensure_head_size(self) -> None:
        # No lock needed: growing a file to a page never loses what another process wrote.
        if os.fstat(self._head_fd).st_size < mmap.PAGESIZE:
            os.ftruncate(self._head_fd, mmap.PAGESIZE)

    def recover(self) -> None:
        """Cut back a torn tail, rebuild missing or damaged indexes, recompute a damaged
        head, upgrade a legacy partition. Hold the lock."""
        fields, legacy = self.read_head_for_recovery()
        self._unseal()
        try:
            head = recover_partition(self.directory, self.config, fields, legacy)
        except OSError as error:
            raise_storage_error(error, self.directory, "recovering the partition")
        self._publish(*head)
        self._head[:_FIELDS_AT] = HEAD_MAGIC
        apply_retention(self.directory, self.config, head[0])

    def _publish(
        self, base: int, end: int, next_offset: int, index_bytes: int, next_index: int
    ) -> None:
        """Store a whole new head (a roll, a recovery); hold the lock.

        The segment base is stored last. Readers take no lock and a writer's stores land one
        8-byte word at a time, visible in program order; a reader can look between any two
        (for as long as the writer is descheduled there). With the base last, a reader that
        sees the new base also sees the new end, and one that sees the old base with the new
        end (0 after a roll) only finds no new data for a moment. The other order let it pair
        the new segment with the old segment's end, and read the new segment from there.
        """
        self._known_due = -1
        _AFTER_BASE.pack_into(self._head, _END_AT, end, next_offset, index_bytes, next_index)
        _BASE.pack_into(self._head, _FIELDS_AT, base)

    def read_head_if_valid(self) -> HeadFields | None:
        """Return the head fields, or None if the head was never written."""
        if self._head[:_FIELDS_AT] not in (HEAD_MAGIC, LEGACY_HEAD_MAGIC):
            return None
        return HEAD_FIELDS.unpack_from(self._head, _FIELDS_AT)

    def read_head_for_recovery(self) -> tuple[HeadFields | None, bool]:
        """Return the head fields recovery may use (None: none, or damaged: recompute) and
        whether the head is a legacy one (written before checksums)."""
        return check_head(bytes(self._head[: HEAD_CHECK_AT + HEAD_CHECK.size]))

    def head(self) -> tuple[int, int, int]:
        """Return (active segment base, committed end position, next offset), lock-free.

        Writers store these fields one after the other, so what a reader gets is not one
        moment's head. Base and end do belong together: the base is read again after the
        end, and a roll stores the new end (0) before the new base (``_publish``), so an end
        read between two equal bases is an end of that segment (possibly an older one: a
        bound, never past committed data). The next offset is NOT paired with the end: an
        append stores the end, then the next offset, and a reader can see one and not the
        other. Use it as a bound on offsets only; find positions by counting records
        (``lookup.locate``).
        """
        mapping = self._head
        while True:
            base, end, next_offset = _BASE_END_NEXT.unpack_from(mapping, _FIELDS_AT)
            if _BASE.unpack_from(mapping, _FIELDS_AT)[0] == base:
                return base, end, next_offset

    def end_offset(self) -> int:
        """Return the offset the next record will get (lock-free)."""
        return int(HEAD_FIELDS.unpack_from(self._head, _FIELDS_AT)[2])

    def append(
        self, data: bytes, positions: list[int], timestamp_us: int, sync: bool, durable_roll: bool
    ) -> int:
        """Append whole records ``data`` (record starts at ``positions`` within it).

        ``sync`` syncs the segment before the head moves; ``durable_roll`` syncs a segment
        being sealed. Returns the offset of the first record. Takes the lock if this object
        does not hold it yet, and keeps it until another writer asks or it idles (lazy release).
        """
        with self._threads:
            if not self._locked:
                self._take_lazily()
            self.used = True
            first = self._append_locked(data, positions, timestamp_us, sync, durable_roll)
            if self._head[_WANTED] and not self._held:
                self._give_back()
            return first

    def _lock(self) -> None:
        if not self._try_lock():
            self._wait_for_lock()

    def append_one(self, record: bytes, timestamp_us: int, sync: bool, durable_roll: bool) -> int:
        """Append one record; return its offset.

        The common case is kept short: this object holds the lock and knows the head from its
        last write (``_known_*``), no index entry is due and the record fits the segment.
        Then the write is one ``pwrite`` and two stores into the head's mapping. Otherwise
        (the first write after taking the lock, a roll, an index entry) it goes the way of
        ``append``. ``acquire``/``release`` rather than ``with``: measured ~80 ns less a call.
        """
        threads = self._threads
        threads.acquire()
        try:
            end = self._known_end
            size = len(record)
            stop = end + size
            if end < self._known_due and stop <= self._segment_bytes:
                try:
                    written = _pwrite(self._segment_fd, record, end)
                    if sync and written == size:
                        os.fdatasync(self._segment_fd)
                except OSError as error:
                    self._write_failed(error, end, None)
                if written != size:
                    self._write_failed(None, end, None, written, size)
                offset = self._known_next
                self._known_end = stop
                self._known_next = following = offset + 1
                _pack_end_and_next(self._head, _END_AT, stop, following)
            else:
                if not self._locked:
                    self._take_lazily()
                offset = self._append_locked(record, _FIRST, timestamp_us, sync, durable_roll)
            self.used = True
            if self._head[_WANTED] and not self._held:
                self._give_back()
            return offset
        finally:
            threads.release()

    def _append_locked(
        self, data: bytes, positions: list[int], timestamp_us: int, sync: bool, durable_roll: bool
    ) -> int:
        self._known_due = -1  # not known until this write is whole (it may raise half-way)
        base, end, next_offset, _, next_index = HEAD_FIELDS.unpack_from(self._head, _FIELDS_AT)
        try:
            if end and end + len(data) > self._segment_bytes:
                base, end, _, next_index = self._roll(next_offset, end, durable_roll)
            if base != self._segment_base:
                self._open_segment(base)
            if self._cut_pending:
                self._cut_back(end)
        except OSError as error:
            raise_storage_error(error, self.directory, "rolling the segment")
        index = HEAD_FIELDS.unpack_from(self._head, _FIELDS_AT)[3:]  # as before this write
        size = len(data)
        try:
            written = os.pwrite(self._segment_fd, data, end)
            if written == size:
                if end + positions[-1] >= next_index:
                    next_index = self._add_index_entries(
                        base, end, next_offset, positions, timestamp_us
                    )
                if sync:
                    os.fdatasync(self._segment_fd)
        except OSError as error:
            self._write_failed(error, end, index)
        if written != size:
            self._write_failed(None, end, index, written, size)
        end += size
        next_offset += len(positions)
        END_AND_NEXT.pack_into(self._head, _END_AT, end, next_offset)
        self._known_end, self._known_next, self._known_due = end, next_offset, next_index
        return int(next_offset - len(positions))

    def _add_index_entries(
        self, base: int, end: int, first: int, positions: list[int], timestamp_us: int
    ) -> int:
        """Append the index entries these records are due; return the next due position."""
        _, _, _, index_bytes, due = HEAD_FIELDS.unpack_from(self._head, _FIELDS_AT)
        entries = []
        for number, position in enumerate(positions):
            if end + position >= due:
                entries.append(
                    pack_index_entry(
                        self._index_seed, first - base + number, end + position, timestamp_us
                    )
                )
                due = end + position + self.config.index_interval_bytes
        data = b"".join(entries)
        if not index_bytes:  # a new index file: its magic first
            data = INDEX_MAGIC + data
        try:
            written = os.pwrite(self._index_fd, data, index_bytes)
        except OSError as error:
            raise_storage_error(error, index_path(self.directory, base), "indexing")
        if written != len(data):
            raise short_write(index_path(self.directory, base), "indexing", written, len(data))
        struct.pack_into("<qq", self._head, _END_AT + 16, index_bytes + len(data), due)
        return due

    def _write_failed(
        self,
        error: OSError | None,
        end: int,
        index: tuple[int, int] | None,
        written: int = 0,
        size: int = 0,
    ) -> NoReturn:
        """A write at ``end`` that raised ``error`` or wrote ``written`` of ``size`` bytes
        (a full disk): cut what it left, and raise. The head's end did
        not move, so nothing of it is acknowledged; ``index`` is the head's (index bytes,
        next index) before the write, put back before the files are cut."""
        self._known_due = -1
        path = segment_path(self.directory, self._segment_base)
        if index is not None:
            struct.pack_into("<qq", self._head, _END_AT + 16, *index)
        try:
            self._cut_back(end)
        except OSError:
            self._cut_pending = True  # cut before the next write, or by recovery
        if error is None:
            raise short_write(path, "appending records", written, size)
        raise_storage_error(error, path, "appending records")

    def _cut_back(self, end: int) -> None:
        """Cut the active segment back to the committed end ``end``, and its index to the
        head's index bytes (shrinking needs no space). Whole records a failed write left
        there must go: recovery would take them for a dead writer's and keep them."""
        os.ftruncate(self._segment_fd, end)
        os.ftruncate(self._index_fd, HEAD_FIELDS.unpack_from(self._head, _FIELDS_AT)[3])
        self._cut_pending = False

    def _open_segment(self, base: int) -> None:
        self.close_files()
        self._segment_fd = os.open(
            segment_path(self.directory, base), os.O_RDWR | os.O_CREAT, 0o644
        )
        self._index_fd = os.open(index_path(self.directory, base), os.O_RDWR | os.O_CREAT, 0o644)
        self._segment_base = base
        self._index_seed = index_seed(base)

    def _roll(self, next_offset: int, end: int, sync: bool) -> tuple[int, int, int, int]:
        """Seal the active segment at its committed end and start segment ``next_offset``."""
        old_base = HEAD_FIELDS.unpack_from(self._head, _FIELDS_AT)[0]
        if old_base != self._segment_base:
            self._open_segment(old_base)
        # Bytes past the committed end were never acknowledged; a sealed segment has none,
        # so readers may read sealed segments to end of file.
        os.ftruncate(self._segment_fd, end)
        if sync:
            os.fsync(self._segment_fd)
        self._open_segment(next_offset)
        os.ftruncate(self._segment_fd, 0)
        os.ftruncate(self._index_fd, 0)
        if sync:
            fsync_directory(self.directory)
        self._publish(next_offset, 0, next_offset, 0, 0)
        apply_retention(self.directory, self.config, next_offset)
        return next_offset, 0, 0, 0

    def sync(self) -> None:
        """Flush this process's writes to the partition's active segment to disk."""
        fd = self._segment_fd
        if fd >= 0:
            try:
                os.fdatasync(fd)
            except OSError as exc:
                # EBADF: a roll closed it meanwhile (from the fsync batcher's thread); a roll
                # syncs the segment it seals. Any other error is a failed sync: report it.
                if exc.errno != errno.EBADF:
                    raise_storage_error(exc, self.directory, "syncing the active segment")

    def close_files(self) -> None:
        """Close the segment and index files (the head stays open)."""
        for fd in (self._segment_fd, self._index_fd):
            if fd >= 0:
                os.close(fd)
        self._segment_fd = self._index_fd = -1
        self._segment_base = -1
        self._known_due = -1

    def close(self) -> None:
        """Close every file of this partition."""
        self.close_files()
        self.release()
        if self._head_fd >= 0:
            self._head.close()
            os.close(self._head_fd)
            self._head_fd = -1


def _open_head(path: Path) -> int:
    """Open a partition's head, creating it first as a page of zeros that was written.

    A page that only ``ftruncate`` made has no storage behind it: on a full disk the first
    store into its mapping would kill the process with SIGBUS. Written bytes have storage
    (or the write fails with ENOSPC: StorageFullError). The page is linked into place whole,
    so a concurrent opener never maps a short file.
    """
    try:
        return os.open(path, os.O_RDWR)
    except FileNotFoundError:
        pass
    try:
        write_file_atomically(path, bytes(mmap.PAGESIZE), fsync=False, exclusive=True)
    except FileExistsError:
        pass  # another opener created it first
    return os.open(path, os.O_RDWR)


def check_head(page: bytes) -> tuple[HeadFields | None, bool]:
    """Judge a head page's first bytes: (fields recovery may use, legacy?).

    A sealed head must pass its CRC (else None: recompute from the segments); an unsealed
    one (its writer was killed holding the lock) and a legacy one are used if plausible.
    """
    magic = page[:_FIELDS_AT]
    if magic not in (HEAD_MAGIC, LEGACY_HEAD_MAGIC):
        return None, False
    fields: HeadFields = HEAD_FIELDS.unpack_from(page, _FIELDS_AT)
    if magic == LEGACY_HEAD_MAGIC:
        return fields, True
    crc, sealed = HEAD_CHECK.unpack_from(page, HEAD_CHECK_AT)
    if sealed == HEAD_SEALED:
        return (fields if crc == head_crc(page) else None), False
    return (fields if sealed == 0 else None), False
