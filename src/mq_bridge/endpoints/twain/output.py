"""The `twain` output: a twainmq producer writing to the topic.

A write the store's disk refuses (twainmq's `StorageFullError`, `StorageIOError`: full or
failing; nothing of it was kept) raises `TwainStorageError`, which is retriable: a route holds
the messages and sends them again once the disk takes writes. Of a batch split over several
partitions or chunks, the parts written before the refusal stay, so a retry may write them
twice (at least once, never lost).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from mq_bridge.endpoints.base import EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.twain.codec import encode_envelope, key_function
from mq_bridge.endpoints.twain.options import TwainOptions, open_store
from mq_bridge.errors import ClosedError, EndpointError, SendError
from mq_bridge.message import Message

__all__ = ["TwainOutput", "TwainStorageError"]

_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


class TwainStorageError(EndpointError, OSError):
    """The store's disk refused a write (full or failing): retriable. Also an ``OSError``
    with the ``errno`` and the ``path`` of the file refused (as twainmq's error names them).
    """

    retriable = True

    def __init__(self, target: str, error: OSError) -> None:
        super().__init__(f"{target}: write refused: {error}")
        self.errno = error.errno
        self.path = Path(str(getattr(error, "path", None) or error.filename or ""))


class TwainOutput(OutputEndpoint):
    """Appends messages to a topic, each in an envelope, under a key.

    The engine's producer is safe to share between threads (each partition file has a
    thread lock beside its flock). A route with `concurrency` > 1 sends from several
    threads; the lock here keeps those sends, `connect` and `close` from interleaving
    (a close never cuts a batch in half). Encoding happens outside it.
    """

    def __init__(self, options: TwainOptions) -> None:
        self._options = options
        self._lock = threading.Lock()
        self._producer: Any = None
        self._closed = False
        self._max_bytes = 0

    def connect(self) -> None:
        with self._lock:
            if self._producer is not None:
                return
            options = self._options
            store = open_store(options)
            config = store.topic_config(options.topic)
            self._key_of = key_function(config.key_type, options.key_from)
            self._max_bytes = config.max_message_bytes
            self._producer = store.producer(options.topic, fsync=options.fsync)
            self._closed = False

    def send(self, messages: Sequence[Message]) -> None:
        """Write the batch with one call before returning (synced first with fsync batch)."""
        self._open()
        key_of, limit = self._key_of, self._max_bytes
        records = list(map(encode_envelope, messages))
        failures: dict[int, BaseException] = {}
        if records and max(map(len, records)) <= limit:  # the common case, looped in C
            pairs: list[tuple[Any, bytes]] = list(zip(map(key_of, messages), records))
        else:
            pairs = []
            for index, (message, record) in enumerate(zip(messages, records)):
                if len(record) > limit:
                    failures[index] = self._too_large(record)
                else:
                    pairs.append((key_of(message), record))
        if pairs:
            try:
                with self._lock:
                    producer = self._open()
                    producer.write_messages(pairs)
                    if self._options.fsync == "batch":
                        producer.flush()
            except OSError as error:
                self._failed(error)
        if failures:
            raise SendError(failures)

    def send_one(self, message: Message) -> None:
        """Write one message; it is in the log (in the kernel) when this returns."""
        record = encode_envelope(message)
        if len(record) > self._max_bytes:
            self._open()
            raise self._too_large(record)
        key = self._key_of(message)
        try:
            with self._lock:
                self._open().write_message(key, record)
        except OSError as error:
            self._failed(error)

    def _failed(self, error: OSError) -> NoReturn:
        """Raise a failed write's error: retriable when the disk refused it (twainmq's
        StorageError says so; a bare OSError by its errno), else an EndpointError."""
        if getattr(error, "retriable", False) or error.errno in _STORAGE_ERRNOS:
            raise TwainStorageError(self.describe(), error) from error
        raise EndpointError(f"{self.describe()}: write failed: {error}") from error

    def _too_large(self, record: bytes) -> EndpointError:
        return EndpointError(
            f"{self.describe()}: a message of {len(record)} bytes (with its envelope) is larger"
            f" than the topic's max_message_bytes {self._max_bytes}"
        )

    def flush(self) -> None:
        """Force what was written to disk, unless `fsync` is never (then nothing is buffered)."""
        with self._lock:
            producer = self._open()
            if self._options.fsync != "never":
                producer.flush()

    def status(self) -> EndpointStatus:
        details = {"fsync": self._options.fsync, "key_from": self._options.key_from}
        return EndpointStatus(
            healthy=self._producer is not None, target=self.describe(), details=details
        )

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
            self._closed = True
            if producer is not None:
                producer.close()

    def _open(self) -> Any:
        producer = self._producer
        if producer is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        return producer
