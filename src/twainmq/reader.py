"""Reading one partition in order, in large chunks, lock-free.

A reader never reads past the committed end published in the partition head, so it never
sees a record a writer has not finished. When its segment has been sealed (the head names a
newer one) it reads that segment to its end, then moves to the segment that starts at its
next offset. That segment's base offset (its file name) must be exactly the offset the reader
reached: anything else is a gap (a missing segment, or one cut short at a record boundary)
or an overlap, and raises TopicCorruptError naming the files, the partition and the offsets,
rather than skipping them or stalling. The check costs one comparison per segment, nothing
per record. The one gap that is not damage is retention's: a slow reader whose segment and
the next ones were deleted by retention moves up to the durable log start
(``log_start.py``), which retention records before it deletes anything.

``on_gap="skip"`` (the consumer's option) moves past a gap instead, to the next offset that
can be read, and logs a warning naming the files, the partition and the offsets skipped.
A record that fails its checks is never skipped: it raises in both modes.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from functools import partial

from .encoding import HEADER, CorruptRecord, check_length, decode_messages
from .errors import TopicCorruptError
from .keys import KeyType
from .log_start import read_log_start
from .lookup import locate
from .message import Message
from .partition import PartitionLog
from .payloads import MessageTypeRegistry, decode_dataclass
from .segments import index_path, list_segments, read_index, segment_path

_SEEK_ATTEMPTS = 5
ON_GAP = ("raise", "skip")
logger = logging.getLogger("twainmq")


class PartitionReader:
    """Sequential reader of one partition; ``next_offset`` is the next offset it will read."""

    def __init__(
        self,
        log: PartitionLog,
        key_type: KeyType,
        registry: MessageTypeRegistry,
        on_gap: str = "raise",
    ) -> None:
        self.log = log
        self._skip_gaps = on_gap == "skip"
        self.partition = log.partition
        self.next_offset = 0
        self._key_width = 0 if key_type.is_text else key_type.width
        self._pending_error: CorruptRecord | TopicCorruptError | None = None
        self._decode_dataclass = partial(decode_dataclass, registry=registry)
        self._fd = -1
        self._base = -1
        self._position = 0
        self._sealed_size = -1
        self._listing: list[int] = []  # segment bases seen by the last directory listing

    def seek(self, offset: int) -> None:
        """Read from ``offset`` next (moved up to the oldest kept offset if it is older)."""
        for attempt in range(_SEEK_ATTEMPTS):
            try:
                head = self.log.head()
                try:
                    base, position, actual = locate(self.log.directory, offset, head)
                except TopicCorruptError as error:
                    if error.offsets is None:
                        raise
                    if not self._skip_gaps:  # raised by fetch, so the consumer can seek on
                        self.close()
                        self.next_offset, self._pending_error = offset, error
                        return
                    self._warn_skipped(error)
                    base, position, actual = locate(self.log.directory, offset, head, True)
                self._open(base)
                break
            except FileNotFoundError:  # retention deleted the segment meanwhile: look again
                if attempt == _SEEK_ATTEMPTS - 1:
                    raise
        self._position = position
        self.next_offset = actual
        self._pending_error = None

    def _open(self, base: int) -> None:
        if base != self._base:
            self.close()
            self._fd = os.open(segment_path(self.log.directory, base), os.O_RDONLY)
            self._base = base
            self._sealed_size = -1

    def fetch(self, max_bytes: int) -> list[Message]:
        """Return the next messages (up to about ``max_bytes`` of records); [] if none."""
        if self._pending_error is not None:
            error = self._pending_error
            if isinstance(error, TopicCorruptError):
                raise error  # a gap met by seek: again on every fetch until the next seek
            self._pending_error = None
            raise self._corrupt(0, error.reason)
        active_base, committed_end, _ = self.log.head()
        if self._base == active_base:
            limit = committed_end
        else:
            if self._sealed_size < 0:
                self._sealed_size = os.fstat(self._fd).st_size
            limit = self._sealed_size
        if self._position >= limit:
            if self._base == active_base:
                return []
            self._next_segment(active_base)
            return self.fetch(max_bytes)
        data = os.pread(self._fd, min(limit - self._position, max_bytes), self._position)
        return self._decode(data, limit)

    def _next_segment(self, active_base: int) -> None:
        """Move from the end of a sealed segment to the start of the next one, which must
        begin at ``next_offset`` (else TopicCorruptError)."""
        directory, sealed, reached = self.log.directory, self._base, self.next_offset
        if self._open_listed_next(sealed, reached, active_base):
            return
        for attempt in range(_SEEK_ATTEMPTS):
            bases = self._listing = list_segments(directory)
            later = [b for b in bases if sealed < b <= active_base]
            if later and later[0] == reached:
                try:
                    self._open(reached)
                except FileNotFoundError:  # deleted meanwhile (retention): look again
                    if attempt == _SEEK_ATTEMPTS - 1:
                        raise
                    continue
                self._position = 0
                return
            if reached < read_log_start(directory):
                # Retention deleted this segment and the next ones under the reader.
                self.seek(reached)
                return
            error = self._gap(sealed, reached, later[0] if later else None, active_base)
            if not self._skip_gaps or not later or later[0] < reached:
                raise error
            self._warn_skipped(error)
            self.seek(later[0])
            return

    def _open_listed_next(self, sealed: int, reached: int, active_base: int) -> bool:
        """Open the next segment as the last listing knows it, if that listing names
        ``reached`` right after ``sealed``; False sends the caller to list the directory.

        Listing a partition of thousands of segments at every segment end made a full read
        quadratic (80 % of a 3-million-message read). Segments are only ever added with a
        base above every existing one, so a listing that already shows ``reached`` next
        stays right; whatever it does not answer is looked up afresh."""
        listing = self._listing
        at = bisect_right(listing, sealed)
        if at == len(listing) or listing[at] != reached or reached > active_base:
            return False
        try:
            self._open(reached)
        except FileNotFoundError:  # deleted meanwhile (retention): list afresh
            return False
        self._position = 0
        return True

    def _warn_skipped(self, error: TopicCorruptError) -> None:
        logger.warning("on_gap=skip: skipping %s", error)

    def _gap(
        self, sealed: int, reached: int, following: int | None, active_base: int
    ) -> TopicCorruptError:
        directory = self.log.directory
        sealed_name = segment_path(directory, sealed).name
        if following is None:
            # The head names an active segment that is not there.
            end = max(self.log.end_offset(), active_base, reached + 1)
            return TopicCorruptError(
                segment_path(directory, active_base),
                -1,
                f"missing: the active segment file is not there ({sealed_name} ends at offset "
                f"{reached})",
                partition=self.partition,
                offsets=range(reached, end),
            )
        next_name = segment_path(directory, following).name
        if following < reached:
            return TopicCorruptError(
                segment_path(directory, sealed),
                -1,
                f"in two segments: {sealed_name} holds records up to offset {reached - 1}, "
                f"past the start of the next segment {next_name}",
                partition=self.partition,
                offsets=range(following, reached),
            )
        missing_name = segment_path(directory, reached).name
        indexed = read_index(index_path(directory, sealed), sealed)
        if indexed and sealed + indexed[-1][0] >= reached:
            # Its own index lists records it no longer holds: the file was cut short.
            path, what = segment_path(directory, sealed), f"{sealed_name} was cut short"
        else:
            path, what = segment_path(directory, reached), f"{missing_name} is missing"
        return TopicCorruptError(
            path,
            -1,
            f"missing: {what} ({sealed_name} ends at offset {reached}, the next segment is "
            f"{next_name}; no segment file {missing_name})",
            partition=self.partition,
            offsets=range(reached, following),
        )

    def _decode(self, data: bytes, limit: int) -> list[Message]:
        messages, stop, error = self._decode_records(data)
        if not messages and error is None:
            data = self._read_one_large_record(data, limit)
            messages, stop, error = self._decode_records(data)
        self._position += stop
        self.next_offset += len(messages)
        if error is not None:
            if not messages:
                raise self._corrupt(error.position - stop, error.reason)
            self._pending_error = error  # hand out the good messages first
        return messages

    def _decode_records(self, data: bytes) -> tuple[list[Message], int, CorruptRecord | None]:
        return decode_messages(
            data,
            len(data),
            self.next_offset,
            self.partition,
            self._key_width,
            self._decode_dataclass,
        )

    def _read_one_large_record(self, data: bytes, limit: int) -> bytes:
        """The chunk held no whole record: read the first record whole (it is large)."""
        if len(data) < HEADER.size:
            raise self._corrupt(0, "committed data ends inside a record header")
        length, _, _, _, key_length = HEADER.unpack_from(data, 0)
        try:
            check_length(length, key_length, 0)
        except CorruptRecord as exc:
            raise self._corrupt(0, exc.reason) from None
        if self._position + 4 + length > limit:
            raise self._corrupt(0, "record runs past the committed end of the segment")
        return os.pread(self._fd, 4 + length, self._position)

    def _corrupt(self, relative: int, reason: str) -> TopicCorruptError:
        path = segment_path(self.log.directory, self._base)
        return TopicCorruptError(path, self._position + relative, reason)

    def close(self) -> None:
        """Close the segment file (the reader can seek again afterwards)."""
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        self._base = -1
