"""The input side of the `file` endpoint: read, split, decode, track progress.

Positions are *logical* byte offsets: where a record lies in the file as first read. When
`delete` removes acknowledged records, the physical file gets shorter and
``physical = logical - removed``; tokens and ids keep their logical offsets, so batches
handed out before a rewrite can still be acked.

A group's progress is ``<path>.<group_id>.offset``, JSON ``{"offset": N, "group_id": ...}``
where N is the offset just past the last acknowledged record. It is saved by writing a
temporary file, fsyncing it, renaming it over the old one and fsyncing the directory, so a
crash leaves either the old or the new offset.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from itertools import accumulate
from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import Batch, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.file.codec import DecodeResult, decode_records
from mq_bridge.endpoints.file.progress import GroupProgress
from mq_bridge.endpoints.kit.atomic_files import replaced_atomically
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import ClosedError, EndpointError

if TYPE_CHECKING:
    from mq_bridge.endpoints.file.options import FileOptions

__all__ = ["FileInput"]

log = logging.getLogger("mq_bridge.endpoints.file")

# Bytes per read: enough that a read costs little per record, few enough that the records
# split from it are still in the CPU cache when they are decoded (1 MiB was slower).
_CHUNK = 1 << 18
_POLL_INTERVAL = 0.02  # seconds between looks at a file that has not grown
_COMPACT_AT = 1 << 20  # acked bytes that make a `delete` rewrite worth its cost
_ID_NAMESPACE = uuid.UUID("2a0c6f0e-5d43-4c55-9a43-0b7f3f1e6c11")


class FileInput(InputEndpoint):
    """Reads records of one file in `consume`, `subscribe` or `group_subscribe` mode."""

    def __init__(self, options: FileOptions, tag_source: bool = False) -> None:
        self._options = options
        self._delimiter = options.delimiter_bytes
        absolute = str(options.file_path.expanduser().absolute())
        #: ids of records without one (raw): this base | the record's logical offset
        self._id_base = uuid.uuid5(_ID_NAMESPACE, absolute).int & ~((1 << 64) - 1)
        self._progress = (
            GroupProgress(options.file_path, options.group_id)
            if options.mode == "group_subscribe" and options.group_id
            else None
        )
        self._fd: int | None = None
        self._closed = False
        self._wakeup = Wakeup()
        self._tag_source = tag_source
        self._reset()

    def _reset(self) -> None:
        """The reading state of a freshly opened input."""
        self._skipped = 0
        self._removed = 0
        self._problem: str | None = None
        self._records: list[bytes] = []
        self._cursor = 0
        self._tail = b""
        self._read_pos = self._next_offset = self._batch_start = 0
        self._at_eof = False
        self._skip_partial = False
        self._warned_tail_at: int | None = None
        self._acked = self._deletable_from = 0

    # --- lifecycle -----------------------------------------------------------------------

    def connect(self) -> None:
        if self._fd is not None:
            return
        if self._closed:
            # A route reconnects a failed input by close() then connect(): open afresh, as a
            # restart would (group progress, or the mode's start; deleted records stay gone).
            self._closed = False
            self._reset()
        path = self._options.file_path
        if self._options.mode == "consume" and not path.exists():
            log.warning("%s does not exist; creating it empty (is the path right?)", path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as error:
            raise EndpointError(f"cannot open {path} for reading: {error}") from error
        start, mid_record = self._start_position(os.fstat(self._fd).st_size)
        self._rewind(start)
        self._skip_partial = mid_record
        self._acked = self._deletable_from = start

    def _start_position(self, size: int) -> tuple[int, bool]:
        """Where to begin, and whether that is inside a record (tailing a file mid-write)."""
        if self._progress is not None:
            stored = self._progress.load()
            if stored is not None and stored <= size:
                return stored, False
            if stored is not None:
                log.warning(
                    "%s is shorter (%d bytes) than group %r's progress %d; was it "
                    "replaced? reading it from the start",
                    self.describe(),
                    size,
                    self._progress.group_id,
                    stored,
                )
                return 0, False
        tail_group = self._progress is not None and self._options.read_from_tail
        from_end = self._options.mode == "subscribe" or tail_group
        if not from_end or size == 0:
            return 0, False
        return size, self._last_bytes(size) != self._delimiter

    def _last_bytes(self, size: int) -> bytes:
        assert self._fd is not None
        width = len(self._delimiter)
        return os.pread(self._fd, width, max(0, size - width))

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        if self._fd is None:
            self._closed = True
            return
        try:
            if self._options.delete and self._acked > self._deletable_from:
                self._delete_acked()
        finally:
            if self._fd is not None:
                os.close(self._fd)
            self._fd = None
            self._closed = True

    # --- reading -------------------------------------------------------------------------

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        deadline = None if timeout is None else time.monotonic() + timeout
        wanted = max(1, max_messages)
        while True:
            if self._wants_more(wanted) and self._fill():
                continue
            if self._cursor < len(self._records):
                batch = self._take(wanted)
                if batch is not None:
                    self._wakeup.consume()  # these answer an interrupt
                    return batch
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return Batch([])
            wait = _POLL_INTERVAL if remaining is None else min(_POLL_INTERVAL, remaining)
            if self._wakeup.pause(wait):
                self._wakeup.consume()
                return Batch([])

    def _wants_more(self, wanted: int) -> bool:
        """Whether to read before taking: nothing buffered, or too little for a full batch
        while the last read did not reach the end of the file."""
        buffered = len(self._records) - self._cursor
        return buffered == 0 or (buffered < wanted and not self._at_eof)

    def _fill(self) -> bool:
        """Read the next chunk into complete records (+ a held-back tail), after the ones
        still buffered; False at the end."""
        fd = self._fd
        if fd is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        size = max(_CHUNK, len(self._tail))  # doubling past a huge record: linear, not n**2
        chunk = os.pread(fd, size, self._read_pos - self._removed)
        self._at_eof = len(chunk) < size
        if not chunk:
            self._check_not_truncated(fd)
            self._note_incomplete_tail()
            return False
        self._read_pos += len(chunk)
        records = (self._tail + chunk if self._tail else chunk).split(self._delimiter)
        self._tail = records.pop()
        if self._skip_partial and records:
            self._skip_partial = False
            start = self._next_offset + len(records.pop(0)) + len(self._delimiter)
            self._next_offset = self._batch_start = self._acked = self._deletable_from = start
        if self._cursor < len(self._records):
            records[:0] = self._records[self._cursor :]
        self._records, self._cursor = records, 0
        return True

    def _check_not_truncated(self, fd: int) -> None:
        """Report (in status and once in the log) a file cut below what was read."""
        size = os.fstat(fd).st_size
        position = self._read_pos - self._removed
        if size < position and self._problem is None:
            self._problem = (
                f"{self._options.file_path} shrank to {size} bytes, below the read position "
                f"{position}: truncated or rewritten by someone else? nothing more is read"
            )
            log.error("%s", self._problem)

    def _note_incomplete_tail(self) -> None:
        offset = self._read_pos - len(self._tail)
        if self._tail and not self._skip_partial and self._warned_tail_at != offset:
            self._warned_tail_at = offset
            log.warning(
                "%s: %d bytes after the last delimiter at offset %d are not delivered "
                "until their delimiter is written (a torn write, or a file without a "
                "final delimiter)",
                self.describe(),
                len(self._tail),
                offset,
            )

    def _take(self, max_messages: int) -> Batch | None:
        """The next decodable records as a batch; None when every one taken was skipped."""
        cursor = self._cursor
        records = self._records[cursor : cursor + max_messages]
        self._cursor = cursor + len(records)
        width = len(self._delimiter)
        offsets = list(accumulate([len(r) + width for r in records], initial=self._next_offset))
        self._next_offset = end = offsets[-1]
        if self._cursor >= len(self._records):
            self._records, self._cursor = [], 0
        result = decode_records(records, offsets, self._options.record_format, self._id_base)
        for offset, reason in result.errors:
            self._skipped += 1
            log.error("%s: skipping the record at offset %d: %s", self.describe(), offset, reason)
        if not result.messages:
            return None
        if self._tag_source:
            _tag_with_source(result, offsets, str(self._options.file_path))
        start, self._batch_start = self._batch_start, end
        return Batch(result.messages, (start, end))

    def _rewind(self, position: int) -> None:
        """Read again from `position` (a record boundary), forgetting what was buffered."""
        self._records = []
        self._cursor = 0
        self._tail = b""
        self._read_pos = self._next_offset = self._batch_start = position
        self._at_eof = False
        self._skip_partial = False
        self._warned_tail_at = None

    # --- acknowledging -------------------------------------------------------------------

    def ack(self, batch: Batch) -> None:
        if batch.token is None:
            return
        start, end = batch.token
        # In order, a batch starts where the last ack ended. After a nack rewound, a later
        # batch's token may start beyond it (it comes again: ignore) or overlap what was
        # acked since (its records were handled: take the new end).
        if not start <= self._acked < end:
            return
        self._acked = end
        if self._progress is not None:
            self._progress.save(end)
        if self._options.delete and self._should_delete():
            self._delete_acked()

    def nack(self, batch: Batch) -> None:
        """Read again from the batch's start, unless an earlier nack already rewound there."""
        if batch.token is not None and self._acked <= batch.token[0] < self._batch_start:
            self._rewind(batch.token[0])

    @property
    def exhausted(self) -> bool:
        return (
            self._options.mode == "consume" and self._at_eof and self._cursor >= len(self._records)
        )

    # --- deleting acknowledged records ---------------------------------------------------

    def _should_delete(self) -> bool:
        acked_bytes = self._acked - self._deletable_from
        everything_acked = self.exhausted and self._acked == self._next_offset
        return acked_bytes >= _COMPACT_AT or (acked_bytes > 0 and everything_acked)

    def _delete_acked(self) -> None:
        """Rewrite the file without the acked records [deletable_from, acked)."""
        low = self._deletable_from - self._removed
        high = self._acked - self._removed
        path = self._options.file_path
        with open(path, "rb") as source, replaced_atomically(path) as target:
            target.write(source.read(low))
            source.seek(high)
            while block := source.read(_CHUNK):
                target.write(block)
        assert self._fd is not None
        os.close(self._fd)
        self._fd = os.open(path, os.O_RDONLY)
        self._removed += high - low
        self._deletable_from = self._acked

    # --- reporting -----------------------------------------------------------------------

    def status(self) -> EndpointStatus:
        buffered = len(self._records) - self._cursor
        return EndpointStatus(
            healthy=not self._closed and self._problem is None,
            target=self.describe(),
            error=self._problem,
            pending=buffered if self._at_eof else None,
            details={
                "mode": self._options.mode,
                "format": self._options.record_format,
                "position": self._next_offset,
                "acked": self._acked,
                "skipped_records": self._skipped,
                "incomplete_tail_bytes": len(self._tail) if self._at_eof else 0,
            },
        )

    def describe(self) -> str:
        return f"file:{self._options.file_path}"


def _tag_with_source(result: DecodeResult, offsets: list[int], path: str) -> None:
    """Add ``mqb.src.file_path`` / ``mqb.src.file_offset`` (opt-in: MQB_SOURCE_METADATA)."""
    failed = {offset for offset, _ in result.errors}
    decoded_offsets = [offset for offset in offsets[:-1] if offset not in failed]
    result.messages = [
        message.with_metadata({"mqb.src.file_path": path, "mqb.src.file_offset": str(offset)})
        for message, offset in zip(result.messages, decoded_offsets)
    ]
