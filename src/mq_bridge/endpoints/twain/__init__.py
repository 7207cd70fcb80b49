"""twain: a topic in a `twainmq` store (a directory): the durable, server-free default.

This module is the output and the builders; `twain_reader` is the input, `twain_options` the
options, `twain_records` the pure envelope and key encoding.

Features
    - Output: writes each message to the topic under a key (see `twain_records` for how the
      key is chosen and for the envelope that keeps the message's id and metadata; a plain
      twainmq consumer reads the record as bytes). A batch (`send`, what routes use) is
      written with one `write_messages` call before `send` returns, so a route acks its
      source only once the records are in the log.
    - Input: reads through a twainmq consumer group. `ack` commits the batch's offsets (the
      next offset to read per partition, Kafka's meaning; acks follow receive order), `nack`
      seeks back so the batch and what follows it come again, closing without an ack hands
      the messages to whoever reads the partition next. Several inputs on one group (threads
      or processes: route instances, `Consumer`s) share the partitions; a crashed one's
      partitions move to the others within about a second and resume from the last commit.
    - `status().pending` is the group's lag: messages after the committed offset, summed
      over every partition. `exhausted` stays false: a topic is a stream.
    - Messages keep their original id; records not written by this endpoint get a stable id
      from topic, partition and offset. With ``MQB_SOURCE_METADATA=1`` inputs add
      ``mqb.src.twain_topic``, ``mqb.src.twain_partition`` and ``mqb.src.twain_offset``.
    - `create` creates the topic when it does not exist (several processes may race: one
      wins, the others use its topic); without it a missing topic fails `connect` clearly.

Options
    root                the store's directory (required; created if missing)
    topic               the topic name (required)
    group               input: the consumer group (default: the route's name; a
                        `Consumer.from_config` has the name "consumer", so set it there)
    start_from          input: start | now, where a group with no commit starts (default start)
    session_timeout_ms  input: a member that does not poll for this long is expelled and its
                        partitions move (default 10000): keep it above a handler's longest run
    commit_interval_ms  input: commit acks at most this often (default 0: each ack commits
                        before it returns). Commits are fsynced files, the dearest step of a
                        route; with e.g. 100, a crash redelivers up to 100 ms more messages
                        (never loses any). Idle inputs, handed-over partitions and close
                        commit what is left at once
    create              create a missing topic: {partitions: 1, key_type: u16, and optionally
                        max_message_bytes, segment_bytes, retention_bytes, retention_seconds}
    key_from            output: the metadata field whose value is the key (default: the id)
    fsync               output: never (default: safe against a process crash; the OS writes
                        it to disk later) | batch (each `send` is synced before it returns;
                        single sends are synced in groups every 10 ms, and on flush/close) |
                        always (every write is synced before it returns)
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.twain.options import NAME_PATTERN, TwainOptions, open_store
from mq_bridge.endpoints.twain.input import TwainInput
from mq_bridge.endpoints.twain.codec import encode_envelope, key_function
from mq_bridge.errors import ClosedError, ConfigError, EndpointError, SendError
from mq_bridge.message import Message

__all__ = ["SCHEMA", "TwainInput", "TwainOptions", "TwainOutput", "build_input", "build_output"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "root": {"type": "string", "minLength": 1, "description": "The store's directory."},
        "topic": {"type": "string", "pattern": NAME_PATTERN, "description": "Topic name."},
        "group": {
            "type": "string",
            "pattern": NAME_PATTERN,
            "description": "Input: consumer group (default: the route's name).",
        },
        "start_from": {"enum": ["start", "now"], "default": "start"},
        "session_timeout_ms": {"type": ["integer", "null"], "minimum": 1},
        "commit_interval_ms": {
            "type": ["integer", "null"],
            "minimum": 0,
            "description": "Input: commit acks at most this often (default 0: every ack).",
        },
        "create": {
            "type": "object",
            "description": "Create the topic if it does not exist, with these settings.",
            "properties": {
                "partitions": {"type": "integer", "minimum": 1, "default": 1},
                "key_type": {"type": "string", "pattern": "^(u8|u16|u32|u64|char[0-9]{1,3})$"},
                "max_message_bytes": {"type": "integer", "minimum": 1},
                "segment_bytes": {"type": "integer", "minimum": 1024},
                "retention_bytes": {"type": ["integer", "null"], "minimum": 0},
                "retention_seconds": {"type": ["number", "null"], "minimum": 0},
            },
            "additionalProperties": False,
        },
        "key_from": {"type": "string", "minLength": 1, "description": "Output: key field."},
        "fsync": {"enum": ["never", "batch", "always"], "default": "never"},
    },
    "required": ["root", "topic"],
    "additionalProperties": False,
}


class TwainOutput(OutputEndpoint):
    """Appends messages to a topic, each in an envelope, under a key.

    A twainmq producer must not be used by two threads at once (its partition locks are
    per open file, so they do not exclude threads sharing it), and a route with
    `concurrency` > 1 sends from several threads: a lock serializes the writes. Encoding
    happens outside it.
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
        pairs: list[tuple[Any, bytes]] = []
        failures: dict[int, BaseException] = {}
        for index, message in enumerate(messages):
            record = encode_envelope(message)
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
                raise EndpointError(f"{self.describe()}: write failed: {error}") from error
        if failures:
            raise SendError(failures)

    def send_one(self, message: Message) -> None:
        """Write one message; it is in the log (in the kernel) when this returns."""
        record = encode_envelope(message)
        if len(record) > self._max_bytes:
            self._open()
            raise self._too_large(record)
        key = self._key_of(message)
        with self._lock:
            self._open().write_message(key, record)

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


def build_input(options: Mapping[str, Any], context: BuildContext) -> TwainInput:
    """A member of `group` (default: the route's name) reading the topic."""
    parsed = TwainOptions.parse(options)
    group = parsed.group or context.route_name
    if not re.fullmatch(NAME_PATTERN, group):
        raise ConfigError(
            f"the route name {group!r} cannot be a group name: set `group`", path="twain.group"
        )
    return TwainInput(parsed, group)


def build_output(options: Mapping[str, Any], context: BuildContext) -> TwainOutput:
    """A producer writing to the topic."""
    return TwainOutput(TwainOptions.parse(options))
