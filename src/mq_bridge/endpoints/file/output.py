"""The `file` output: appends records to a file it keeps open.

A send is one ``write`` of its records. A write the disk refuses (ENOSPC, EDQUOT, EIO) or cuts
short (a full disk) is taken back: the file is cut to where that send began, so no fragment is
left for the next send to glue onto, and the send raises `FileStorageError` (retriable: a route
holds the messages and sends them again once the disk takes writes). Records buffered by
single sends (`linger_ms`) stay buffered when their write is refused and go out with the
next write that succeeds.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from mq_bridge.endpoints.base import OutputEndpoint
from mq_bridge.endpoints.file.codec import (
    encode_record,
    encode_records,
    text_envelope,
)
from mq_bridge.endpoints.file.options import FileOptions
from mq_bridge.errors import ClosedError, EndpointError, SendError
from mq_bridge.message import (
    Message,
    dump_json_transient,
    json_send_parts,
)

__all__ = ["Appender", "FileOutput", "FileStorageError"]

log = logging.getLogger(__name__)

_BUFFER_LIMIT = 1 << 16  # buffered bytes that trigger a write without waiting for linger
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


class FileStorageError(EndpointError, OSError):
    """The disk refused a write to the file: full (``ENOSPC``, ``EDQUOT``, or a write cut
    short) or failing (``EIO``). Nothing of that send is left in the file. Retriable; also an
    ``OSError`` (``path``, ``errno``), as the error it replaces was."""

    retriable = True

    def __init__(self, path: Path, code: int, detail: str) -> None:
        name = errno.errorcode.get(code, str(code))
        super().__init__(
            f"file:{path}: write refused ({name}, {detail}); nothing of this send is in the"
            " file: retry once the disk takes writes"
        )
        self.path = path
        self.errno = code


class FileOutput(OutputEndpoint):
    """Appends records to a file it keeps open (see `Appender` for when bytes reach it)."""

    def __init__(self, options: FileOptions) -> None:
        self._options = options
        self._appender: Appender | None = None
        self._append: Callable[[bytes], None] = self._refuse
        self._closed = False

    def connect(self) -> None:
        if self._appender is not None:
            return
        self._closed = False  # a closed output opens again: the route's reconnect
        self._appender = Appender(self._options)
        self._append = self._appender.append
        # Flushes what single sends left buffered if the publisher is collected or the
        # interpreter exits without `close()` (the appender, not self, is referenced).
        weakref.finalize(self, self._appender.close)

    def send(self, messages: Sequence[Message]) -> None:
        """Write the batch (after anything buffered) before returning: a route acks after."""
        data, failures = encode_records(
            messages, self._options.record_format, self._options.delimiter_bytes
        )
        self._open().write_through(data)
        if failures:
            raise SendError(failures)

    def send_one(self, message: Message) -> None:
        """One message: buffered for at most `linger_ms` unless linger is 0 or fsync always.

        It is encoded now (the buffer holds records), so a message that cannot be written
        (its record holds the delimiter) fails here.
        """
        options = self._options
        if options.record_format in ("normal", "text"):  # the common case, without the dispatch
            record = text_envelope(message.payload, message.metadata_view, message.id_int)
            if options.delimiter_bytes not in record:
                self._append(record + options.delimiter_bytes)
                return
        self._append(encode_record(message, options.record_format, options.delimiter_bytes))

    def json_sender(self) -> Callable[[Any, Mapping[str, str] | None, Any], None] | None:
        """`Publisher.send_json` without building a `Message`, for the envelope formats.

        The publisher calls this once; None means "send a Message as usual".
        """
        if self._options.record_format not in ("normal", "text"):
            return None
        return self._send_json

    def _send_json(self, data: Any, metadata: Mapping[str, str] | None, id: Any) -> None:
        """What `Publisher.send_json` does, straight to a record: same checks, same bytes."""
        payload, checked, id_value = json_send_parts(data, metadata, id, dump_json_transient)
        record = text_envelope(payload, checked, id_value)
        delimiter = self._options.delimiter_bytes
        if delimiter in record:  # raises the usual error naming the message
            encode_record(Message.trusted(payload, checked, id_value), "normal", delimiter)
        self._append(record + delimiter)

    def _refuse(self, record: bytes) -> None:
        self._open()

    def _open(self) -> Appender:
        appender = self._appender
        if appender is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        return appender

    def flush(self) -> None:
        """Write everything buffered (and fsync it unless `fsync` is off)."""
        if self._appender is not None:
            self._appender.flush()

    def describe(self) -> str:
        return f"file:{self._options.file_path}"

    def close(self) -> None:
        appender, self._appender = self._appender, None
        self._append = self._refuse
        self._closed = True
        if appender is not None:
            appender.close()


class Appender:
    """The open file, the records single sends buffered, and the thread that writes them.

    Single sends (`append`) are collected for at most `linger_ms` or about `_BUFFER_LIMIT`
    bytes and written with one `write` call: that is what makes one-message-at-a-time
    publishing fast. The buffered items are encoded records (bytes, which the cyclic GC
    does not track). A batch (`write_through`) goes out with whatever is buffered before
    it returns. A failed background write is raised by the next call (refused by the
    disk, its records stay buffered for the next write).
    """

    def __init__(self, options: FileOptions) -> None:
        self._options = options
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._error: EndpointError | None = None
        self._unsynced = False
        self._last_sync = time.monotonic()
        self._buffered = options.linger > 0 and options.fsync != "always"
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._fd = _open_for_append(options.file_path, options.delimiter_bytes)
        # A pipe or a terminal cannot be cut back: a short write there is finished instead.
        self._regular = stat.S_ISREG(os.fstat(self._fd).st_mode)
        self._fragment: tuple[int, int] | None = None  # (start, end) of a refused write
        if self._buffered:
            threading.Thread(
                target=self._flush_periodically, name="file-appender", daemon=True
            ).start()

    def append(self, record: bytes) -> None:
        """Buffer one record (delimiter included); write when due."""
        with self._lock:
            if self._fd < 0 or self._error is not None:
                self._check()
            if not self._buffered:
                self._write(record)
                return
            pending = self._pending
            if self._pending_bytes + len(record) >= _BUFFER_LIMIT:
                self._write(record)  # refused: the caller's record is not kept
                return
            pending.append(record)
            self._pending_bytes += len(record)
            if len(pending) == 1:
                self._wake.set()

    def write_through(self, data: bytes) -> None:
        """Write what is buffered and then `data`, before returning."""
        with self._lock:
            self._check()
            if data or self._pending:
                self._write(data)

    def flush(self) -> None:
        """Write what is buffered and, unless fsync is off, force it to disk."""
        with self._lock:
            self._check()
            if self._pending:
                self._write(b"")
            if self._options.fsync != "off":
                self._sync()

    def close(self) -> None:
        """Flush and close the file. Idempotent; safe from a finalizer."""
        self._stopped.set()
        self._wake.set()
        with self._lock:
            if self._fd < 0:
                return
            try:
                if self._pending:
                    self._write(b"")
                if self._options.fsync != "off":
                    self._sync()
            finally:
                os.close(self._fd)
                self._fd = -1

    def _check(self) -> None:
        if self._fd < 0:
            raise ClosedError(f"file:{self._options.file_path} is closed")
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _write(self, data: bytes) -> None:
        """Write pending records plus `data` (lock held), then fsync as the policy says.

        Refused (`FileStorageError`), the file is as it was: the pending records, which their
        senders were told are buffered, stay pending; `data` is the caller's to send again.
        """
        if self._fragment is not None:
            self._remove_fragment()
        pending = self._pending
        self._write_once(b"".join(pending) + data if pending else data)
        if pending:
            self._pending = []
            self._pending_bytes = 0
        self._unsynced = True
        policy = self._options.fsync
        if policy == "off":
            return
        due = time.monotonic() - self._last_sync >= self._options.fsync_interval
        if policy != "periodic" or due:
            try:
                self._sync()
            except FileStorageError:
                self._take_back(len(data))  # not on disk: this send failed (not the buffered)
                raise

    def _write_once(self, data: bytes) -> None:
        """Append `data` with one write. A write the disk refuses or cuts short leaves
        nothing behind (`_take_back`) and raises FileStorageError."""
        path = self._options.file_path
        try:
            written = os.write(self._fd, data)
        except OSError as error:
            _raise_refused(path, error)
        if written == len(data):
            return
        if not self._regular:  # a pipe: no position to cut back to; finish the record
            _write_rest(self._fd, memoryview(data)[written:])
            return
        self._take_back(written)
        raise FileStorageError(path, errno.ENOSPC, f"wrote {written} of {len(data)} bytes")

    def _take_back(self, count: int) -> None:
        """Cut the last `count` bytes this appender wrote (the fragment of a refused send),
        unless another process appended after them. A cut that fails is retried before the
        next write, which never goes after a fragment."""
        if not self._regular or not count:
            return
        end = os.lseek(self._fd, 0, os.SEEK_CUR)  # O_APPEND: just after our last write
        self._fragment = (end - count, end)
        self._remove_fragment()

    def _remove_fragment(self) -> None:
        assert self._fragment is not None
        start, end = self._fragment
        path = self._options.file_path
        try:
            if os.fstat(self._fd).st_size != end:
                log.warning(
                    "file:%s: another writer appended after a refused write of ours; its %d "
                    "bytes at %d stay",
                    path,
                    end - start,
                    start,
                )
            else:
                os.ftruncate(self._fd, start)  # shrinking needs no space
        except OSError as error:
            _raise_refused(path, error)  # still there: the next write tries again
        self._fragment = None

    def _sync(self) -> None:
        if self._unsynced:
            try:
                os.fsync(self._fd)
            except OSError as error:
                _raise_refused(self._options.file_path, error)
            self._unsynced = False
        self._last_sync = time.monotonic()

    def _flush_periodically(self) -> None:
        linger = self._options.linger
        while not self._stopped.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stopped.wait(linger):
                return
            with self._lock:
                if self._pending and self._fd >= 0:
                    lost = len(self._pending)
                    try:
                        self._write(b"")
                    except FileStorageError as error:  # still pending: tried again later
                        self._error = error  # raised once by the caller's next call
                        self._wake.set()
                    except Exception as error:  # kept for the caller's next call
                        self._error = EndpointError(
                            f"writing {lost} buffered record(s) to {self._options.file_path} "
                            f"failed, they were not written: {error}"
                        )
                        self._pending = []
                        self._pending_bytes = 0


def _open_for_append(path: Path, delimiter: bytes) -> int:
    """Open (creating parents) for appending; end a torn last record left by a crash."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as error:
        raise EndpointError(f"cannot open {path} for appending: {error}") from error
    size = os.fstat(fd).st_size
    if size and os.pread(fd, len(delimiter), max(0, size - len(delimiter))) != delimiter:
        # Without this, our first record would glue onto the fragment and both be lost.
        log.warning("file:%s ends without a delimiter; terminating that last record", path)
        try:
            _write_rest(fd, memoryview(delimiter))
        except OSError as error:
            os.close(fd)
            _raise_refused(path, error)
    return fd


def _write_rest(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view) :]


def _raise_refused(path: Path, error: OSError) -> NoReturn:
    """Raise `error` as a FileStorageError when the disk refused (full, failing), else as
    it is. Call it where `error` is handled."""
    if error.errno not in _STORAGE_ERRNOS or isinstance(error, FileStorageError):
        raise error
    raise FileStorageError(path, error.errno, error.strerror or os.strerror(error.errno)) from error
