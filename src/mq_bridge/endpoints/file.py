"""file: messages as delimited records in a local file (see `file_formats` for the layout).

Features
    - Formats `normal` (JSON envelope with id, metadata, payload; the default), `json`
      (envelope with the payload as a JSON value), `text`, `raw` (payload bytes only), and
      mq-bridge's aliases (`envelope`, `envelope_json`, `envelope_text`, `payload`).
    - Output: parent directories are created; the file stays open and each `send` batch is
      one append. `fsync` decides when appended data is forced to disk.
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

Options
    path              the file (required)
    format            normal | json | text | raw (default normal)
    delimiter         record delimiter: text, or hex such as "0x00" (default "\\n")
    mode              input: consume | subscribe | group_subscribe (default consume)
    delete            input (consume, subscribe): remove acknowledged records (default false)
                      Rewrites the file: only safe when nothing else appends meanwhile.
    group_id          input (group_subscribe): names the progress file <path>.<group_id>.offset
    read_from_tail    input (group_subscribe): with no stored progress, start at the end
    fsync             output: off (default; the OS flushes) | batch (before `send` returns)
                      | periodic (at most every fsync_interval_ms, and on flush/close)
    fsync_interval_ms output: for `periodic` (default 1000)
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.endpoints.file_formats import FORMATS, encode_records, format_name
from mq_bridge.endpoints.file_reader import FileInput
from mq_bridge.errors import ClosedError, ConfigError, EndpointError, SendError
from mq_bridge.message import Message

__all__ = ["SCHEMA", "FileInput", "FileOptions", "FileOutput", "build_input", "build_output"]

log = logging.getLogger(__name__)

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
        "fsync": {"enum": ["off", "batch", "periodic"], "default": "off"},
        "fsync_interval_ms": {"type": ["integer", "null"], "minimum": 0},
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
    """Appends records to a file it keeps open; one write per `send` batch."""

    def __init__(self, options: FileOptions) -> None:
        self._options = options
        self._fd: int | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._last_sync = time.monotonic()
        self._unsynced = False

    def connect(self) -> None:
        if self._fd is not None:
            return
        if self._closed:
            raise ClosedError(f"{self.describe()} is closed")
        path = self._options.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as error:
            raise EndpointError(f"cannot open {path} for appending: {error}") from error
        self._terminate_torn_tail()

    def _terminate_torn_tail(self) -> None:
        """End a fragment left by a crashed writer, so our first record starts a line."""
        delimiter = self._options.delimiter
        with open(self._options.path, "rb") as file:
            size = file.seek(0, os.SEEK_END)
            if size == 0:
                return
            file.seek(max(0, size - len(delimiter)))
            if file.read() == delimiter:
                return
        log.warning("%s ends without a delimiter; terminating that last record", self.describe())
        self._write(delimiter)

    def send(self, messages: Sequence[Message]) -> None:
        data, failures = encode_records(messages, self._options.format, self._options.delimiter)
        if data:
            with self._lock:
                self._write(data)
                self._sync_after_send()
        if failures:
            raise SendError(failures)

    def _write(self, data: bytes) -> None:
        fd = self._fd
        if fd is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        written = os.write(fd, data)
        if written < len(data):  # rare (disk full, signals): finish the record
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view) :]
        self._unsynced = True

    def _sync_after_send(self) -> None:
        policy = self._options.fsync
        due = time.monotonic() - self._last_sync >= self._options.fsync_interval
        if policy == "batch" or (policy == "periodic" and due):
            self._sync()

    def _sync(self) -> None:
        if self._fd is not None and self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False
        self._last_sync = time.monotonic()

    def flush(self) -> None:
        """Appends are unbuffered; with `fsync` other than off, force them to disk."""
        with self._lock:
            if self._options.fsync != "off":
                self._sync()

    def describe(self) -> str:
        return f"file:{self._options.path}"

    def close(self) -> None:
        with self._lock:
            if self._fd is None:
                self._closed = True
                return
            try:
                if self._options.fsync != "off":
                    self._sync()
            finally:
                os.close(self._fd)
                self._fd = None
                self._closed = True


def build_output(options: Mapping[str, Any], context: BuildContext) -> FileOutput:
    """A publisher endpoint appending to ``options["path"]``."""
    return FileOutput(FileOptions.parse(options))


def build_input(options: Mapping[str, Any], context: BuildContext) -> FileInput:
    """A consumer endpoint reading ``options["path"]`` in the configured mode."""
    return FileInput(FileOptions.parse(options))
