"""file: messages as delimited records in a local file (see `file_formats` for the layout).

Features
    - Formats `normal` (JSON envelope with id, metadata, payload; the default), `json`
      (envelope with the payload as a JSON value), `text`, `raw` (payload bytes only), and
      mq-bridge's aliases (`envelope`, `envelope_json`, `envelope_text`, `payload`).
    - Output: parent directories are created and the file stays open. A batch (`send`,
      what routes and `send_batch` use) is written with one `write` before `send` returns,
      so a route acks its source only once the records are in the file. Single sends
      (`Publisher.send`) are buffered for at most `linger_ms` (or 64 KiB) and written
      together: after a `kill -9` the last few milliseconds of single sends may be missing
      unless `flush()` returned, `linger_ms: 0` or `fsync: always` is set. `fsync` decides
      when written data is forced to disk (a power loss, not a process crash).
    - Input modes: `consume` (from the start; `exhausted` turns true once everything up to
      the end of the file has been handed out), `subscribe` (tail from the end),
      `group_subscribe` (from the group's stored progress; `ack` saves it atomically).
      `delete: true` (consume/subscribe) removes acknowledged records from the file.
    - A record is complete only once its delimiter is written: an unterminated last record
      (a torn write, or one still being written) is never delivered; it is reported in
      `status()` and, in `consume` mode, does not hold back `exhausted`. A publisher that
      opens a file ending in such a fragment first terminates it, so a new record never
      glues onto it. Records that cannot be decoded are logged and skipped.
    - `nack` rewinds to the nacked batch: it and everything after it is delivered again.
    - `raw` records carry no id: theirs is derived from the file and the byte offset, so a
      redelivered record keeps its id. ``MQB_SOURCE_METADATA=1`` adds
      ``mqb.src.file_path`` and ``mqb.src.file_offset``. A file cut below what was read
      shows as unhealthy in `status()`.

Options
    path              the file (required)
    format            normal | json | text | raw (default normal)
    delimiter         record delimiter: text, or hex such as "0x00" (default "\\n")
    mode              input: consume | subscribe | group_subscribe (default consume)
    delete            input (consume, subscribe): remove acknowledged records (default false)
                      Rewrites the file: only safe when nothing else appends meanwhile.
    group_id          input (group_subscribe): names the progress file <path>.<group_id>.offset
    read_from_tail    input (group_subscribe): with no stored progress, start at the end
    fsync             output: off (default; the OS flushes) | batch (every write of a batch
                      or of the buffer) | periodic (at most every fsync_interval_ms, and on
                      flush/close) | always (every send, single ones too, written and synced
                      before it returns; the slowest)
    fsync_interval_ms output: for `periodic` (default 1000)
    linger_ms         output: how long single sends may wait in the buffer (default 5; 0 =
                      write each before returning)
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.endpoints.file.codec import (
    FORMATS,
    encode_record,
    encode_records,
    format_name,
    text_envelope,
)
from mq_bridge.endpoints.file.input import FileInput
from mq_bridge.errors import ClosedError, ConfigError, EndpointError, SendError
from mq_bridge.message import (
    NO_METADATA,
    Message,
    _coerce_metadata,
    _dump_json,
    new_message_id,
    normalize_message_id,
)

__all__ = ["SCHEMA", "FileInput", "FileOptions", "FileOutput", "build_input", "build_output"]

log = logging.getLogger(__name__)

_orjson_dumps = orjson.dumps
_NON_STR_KEYS = orjson.OPT_NON_STR_KEYS
_BUFFER_LIMIT = 1 << 16  # buffered bytes that trigger a write without waiting for linger

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "description": "The file."},
        "format": {"enum": sorted(FORMATS), "default": "normal"},
        "delimiter": {
            "type": ["string", "null"],
            "minLength": 1,
            "description": 'Record delimiter: text, or hex such as "0x00". Default "\\n".',
        },
        "mode": {"enum": ["consume", "subscribe", "group_subscribe"], "default": "consume"},
        "delete": {"type": "boolean", "default": False},
        "group_id": {"type": "string", "pattern": "^[A-Za-z0-9._-]+$"},
        "read_from_tail": {"type": "boolean", "default": False},
        "fsync": {"enum": ["off", "batch", "periodic", "always"], "default": "off"},
        "fsync_interval_ms": {"type": ["integer", "null"], "minimum": 0},
        "linger_ms": {"type": ["integer", "null"], "minimum": 0},
    },
    "required": ["path"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class FileOptions:
    """The validated options of one `file` endpoint."""

    path: Path
    format: str = "normal"
    delimiter: bytes = b"\n"
    mode: str = "consume"
    delete: bool = False
    group_id: str | None = None
    read_from_tail: bool = False
    fsync: str = "off"
    fsync_interval: float = 1.0
    linger: float = 0.005

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> FileOptions:
        """Options from a config block; `ConfigError` names the bad field."""
        path = options.get("path")
        if not isinstance(path, str) or not path:
            raise ConfigError("needs a `path`", path="file.path")
        mode = options.get("mode") or "consume"
        group_id = options.get("group_id")
        if mode == "group_subscribe" and not group_id:
            raise ConfigError("mode group_subscribe needs a `group_id`", path="file.group_id")
        if group_id is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", group_id):
            raise ConfigError(
                f"must be letters, digits, '.', '_' or '-': {group_id!r}", path="file.group_id"
            )
        if options.get("delete") and mode == "group_subscribe":
            raise ConfigError(
                "`delete` works with consume and subscribe, not group_subscribe", path="file.delete"
            )
        interval_ms = options.get("fsync_interval_ms")
        linger_ms = options.get("linger_ms")
        return cls(
            path=Path(path).expanduser(),
            format=_parse_format(options.get("format") or "normal"),
            delimiter=parse_delimiter(options.get("delimiter")),
            mode=mode,
            delete=bool(options.get("delete")),
            group_id=group_id,
            read_from_tail=bool(options.get("read_from_tail")),
            fsync=options.get("fsync") or "off",
            fsync_interval=(1000 if interval_ms is None else interval_ms) / 1000,
            linger=(5 if linger_ms is None else linger_ms) / 1000,
        )


def _parse_format(name: str) -> str:
    try:
        return format_name(name)
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise ConfigError(f"unknown format {name!r}; one of {known}", "file.format") from None


def parse_delimiter(value: str | None) -> bytes:
    """The delimiter bytes: None means newline; ``0x..`` is hex; anything else is UTF-8 text."""
    if value is None:
        return b"\n"
    if value[:2].lower() == "0x" and len(value) > 2:
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            raise ConfigError(f"bad hex delimiter {value!r}", path="file.delimiter") from None
    if not value:
        raise ConfigError("the delimiter must not be empty", path="file.delimiter")
    return value.encode()


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
        if self._closed:
            raise ClosedError(f"{self.describe()} is closed")
        self._appender = Appender(self._options)
        self._append = self._appender.append
        # Flushes what single sends left buffered if the publisher is collected or the
        # interpreter exits without `close()` (the appender, not self, is referenced).
        weakref.finalize(self, self._appender.close)

    def send(self, messages: Sequence[Message]) -> None:
        """Write the batch (after anything buffered) before returning: a route acks after."""
        data, failures = encode_records(messages, self._options.format, self._options.delimiter)
        self._open().write_through(data)
        if failures:
            raise SendError(failures)

    def send_one(self, message: Message) -> None:
        """One message: buffered for at most `linger_ms` unless linger is 0 or fsync always.

        It is encoded now (the buffer holds records), so a message that cannot be written
        (its record holds the delimiter) fails here.
        """
        options = self._options
        if options.format in ("normal", "text"):  # the common case, without the dispatch
            record = text_envelope(message._payload, message._metadata, message._id)
            if options.delimiter not in record:
                self._append(record + options.delimiter)
                return
        self._append(encode_record(message, options.format, options.delimiter))

    def json_sender(self) -> Callable[[Any, Mapping[str, str] | None, Any], None] | None:
        """`Publisher.send_json` without building a `Message`, for the envelope formats.

        The publisher calls this once; None means "send a Message as usual".
        """
        if self._options.format not in ("normal", "text"):
            return None
        return self._send_json

    def _send_json(self, data: Any, metadata: Mapping[str, str] | None, id: Any) -> None:
        """What `Publisher.send_json` does, straight to a record: same checks, same bytes."""
        try:
            payload = _orjson_dumps(data, option=_NON_STR_KEYS)  # no copy: it is not kept
        except TypeError:  # what orjson cannot encode: `_dump_json` decides (or raises)
            payload = _dump_json(data)
        checked = _coerce_metadata(metadata) if metadata else NO_METADATA
        id_value = new_message_id() if id is None else normalize_message_id(id)
        record = text_envelope(payload, checked, id_value)
        delimiter = self._options.delimiter
        if delimiter in record:  # raises the usual error naming the message
            encode_record(Message._trusted(payload, checked, id_value), "normal", delimiter)
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
        return f"file:{self._options.path}"

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
    it returns. A failed background write is raised by the next call.
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
        self._fd = _open_for_append(options.path, options.delimiter)
        if self._buffered:
            threading.Thread(
                target=self._flush_periodically, name="file-appender", daemon=True
            ).start()

    def append(self, record: bytes) -> None:
        """Buffer one record (delimiter included); write when due."""
        with self._lock:
            if self._fd < 0 or self._error is not None:
                self._check()
            pending = self._pending
            pending.append(record)
            if not self._buffered:
                self._write(b"")
                return
            self._pending_bytes += len(record)
            if self._pending_bytes >= _BUFFER_LIMIT:
                self._write(b"")
            elif len(pending) == 1:
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
                if self._pending and self._error is None:
                    self._write(b"")
                if self._options.fsync != "off":
                    self._sync()
            finally:
                os.close(self._fd)
                self._fd = -1

    def _check(self) -> None:
        if self._fd < 0:
            raise ClosedError(f"file:{self._options.path} is closed")
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _write(self, data: bytes) -> None:
        """Write pending records plus `data` (lock held), then fsync as the policy says."""
        if self._pending:
            data = b"".join(self._pending) + data
            self._pending = []
            self._pending_bytes = 0
        _write_all(self._fd, data)
        self._unsynced = True
        policy = self._options.fsync
        if policy == "off":
            return
        due = time.monotonic() - self._last_sync >= self._options.fsync_interval
        if policy != "periodic" or due:
            self._sync()

    def _sync(self) -> None:
        if self._unsynced:
            os.fsync(self._fd)
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
                    except Exception as error:  # kept for the caller's next call
                        self._error = EndpointError(
                            f"writing {lost} buffered record(s) to {self._options.path} "
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
        _write_all(fd, delimiter)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):  # rare (disk full, signals): finish the record
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def build_output(options: Mapping[str, Any], context: BuildContext) -> FileOutput:
    """A publisher endpoint appending to ``options["path"]``."""
    return FileOutput(FileOptions.parse(options))


def build_input(options: Mapping[str, Any], context: BuildContext) -> FileInput:
    """A consumer endpoint reading ``options["path"]`` in the configured mode."""
    return FileInput(FileOptions.parse(options))
