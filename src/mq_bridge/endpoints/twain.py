"""twain: a topic in a `twainmq` store (a directory): the durable, server-free default.

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
    create              create a missing topic: {partitions: 1, key_type: u16, and optionally
                        max_message_bytes, segment_bytes, retention_bytes, retention_seconds}
    key_from            output: the metadata field whose value is the key (default: the id)
    fsync               output: never (default: safe against a process crash; the OS writes
                        it to disk later) | batch (each `send` is synced before it returns;
                        single sends are synced in groups every 10 ms, and on flush/close) |
                        always (every write is synced before it returns)
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mq_bridge import _env
from mq_bridge.endpoints.base import (
    Batch,
    BuildContext,
    EndpointStatus,
    InputEndpoint,
    OutputEndpoint,
)
from mq_bridge.endpoints.twain_records import decode_batch, encode_envelope, key_function
from mq_bridge.errors import ClosedError, ConfigError, EndpointError, SendError
from mq_bridge.message import Message
from twainmq import TopicExistsError, Twain, TwainMQError
from twainmq.groups import CommitFencedError, GroupConsumer

__all__ = ["SCHEMA", "TwainInput", "TwainOptions", "TwainOutput", "build_input", "build_output"]

log = logging.getLogger(__name__)

_NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$"
_POLL_SLICE = 0.05  # a waiting receive notices `interrupt()` at least this often
_CREATE_SETTINGS = (
    "partitions",
    "key_type",
    "max_message_bytes",
    "segment_bytes",
    "retention_bytes",
    "retention_seconds",
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "root": {"type": "string", "minLength": 1, "description": "The store's directory."},
        "topic": {"type": "string", "pattern": _NAME_PATTERN, "description": "Topic name."},
        "group": {
            "type": "string",
            "pattern": _NAME_PATTERN,
            "description": "Input: consumer group (default: the route's name).",
        },
        "start_from": {"enum": ["start", "now"], "default": "start"},
        "session_timeout_ms": {"type": ["integer", "null"], "minimum": 1},
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


@dataclass(frozen=True)
class TwainOptions:
    """The validated options of one `twain` endpoint."""

    root: Path
    topic: str
    group: str | None = None
    start_from: str = "start"
    session_timeout: float = 10.0
    create: Mapping[str, Any] | None = None
    key_from: str | None = None
    fsync: str = "never"

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> TwainOptions:
        """Options from a config block; `ConfigError` names the bad field."""
        root, topic = options.get("root"), options.get("topic")
        if not isinstance(root, str) or not root:
            raise ConfigError("needs a `root` (the store's directory)", path="twain.root")
        _check_name(topic, "twain.topic")
        group = options.get("group")
        if group is not None:
            _check_name(group, "twain.group")
        timeout_ms = options.get("session_timeout_ms")
        return cls(
            root=Path(root).expanduser(),
            topic=str(topic),
            group=group,
            start_from=_choice(options, "start_from", ("start", "now")),
            session_timeout=10.0 if timeout_ms is None else timeout_ms / 1000,
            create=_create_settings(options.get("create")),
            key_from=options.get("key_from"),
            fsync=_choice(options, "fsync", ("never", "batch", "always")),
        )

    def describe(self) -> str:
        return f"twain:{self.root}/{self.topic}"


def _check_name(value: object, path: str) -> None:
    if not isinstance(value, str) or not re.fullmatch(_NAME_PATTERN, value):
        raise ConfigError(
            f"{value!r} is not a valid name: 1-200 of A-Z a-z 0-9 . _ -, not starting with"
            " '.' or '-'",
            path=path,
        )


def _choice(options: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = options.get(key) or allowed[0]
    if value not in allowed:
        raise ConfigError(f"must be one of {', '.join(allowed)}, got {value!r}", f"twain.{key}")
    return str(value)


def _create_settings(value: object) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError("must be a mapping of topic settings", path="twain.create")
    unknown = sorted(set(value) - set(_CREATE_SETTINGS))
    if unknown:
        raise ConfigError(f"unknown topic settings {unknown}", path="twain.create")
    return dict(value)


def open_store(options: TwainOptions) -> Twain:
    """The store, with the topic created first when `create` asks for it."""
    try:
        store = Twain(options.root)
        if options.create is not None and not store.topic_exists(options.topic):
            try:
                store.create_topic(options.topic, **options.create)
                log.info("%s: created the topic (%s)", options.describe(), options.create)
            except TopicExistsError:
                pass  # another instance created it first: use that one
    except (OSError, TwainMQError) as error:
        raise EndpointError(f"{options.describe()}: cannot open the store: {error}") from error
    if not store.topic_exists(options.topic):
        raise EndpointError(
            f"{options.describe()}: topic {options.topic!r} does not exist; create it"
            f" (twainmq --root {options.root} create {options.topic} -p PARTITIONS) or add"
            " `create: {partitions: N}` to the endpoint"
        )
    return store


@dataclass(frozen=True, slots=True)
class _Span:
    """Where a batch starts and ends in each partition it touches (a batch's token)."""

    first: dict[int, int]
    next: dict[int, int]


class TwainInput(InputEndpoint):
    """Reads a topic as one member of a consumer group."""

    def __init__(self, options: TwainOptions, group: str) -> None:
        self._options = options
        self._group = group
        self._consumer: GroupConsumer | None = None
        self._closed = False
        self._interrupts = 0
        self._tag_source = _env.source_metadata_enabled()

    def connect(self) -> None:
        if self._consumer is not None:
            return
        options = self._options
        store = open_store(options)
        try:
            self._consumer = store.consumer(
                options.topic,
                options.start_from,
                group=self._group,
                session_timeout=options.session_timeout,
            )
        except (OSError, TwainMQError) as error:
            raise EndpointError(f"{self.describe()}: cannot join the group: {error}") from error
        self._closed = False

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        consumer = self._open()
        records = self._poll(consumer, max_messages, timeout)
        if not records:
            return Batch([])
        topic = self._options.topic
        messages, first, after = decode_batch(records, topic)
        if self._tag_source:
            messages = [
                m.with_metadata(_source_tags(topic, r.partition, r.offset))
                for m, r in zip(messages, records)
            ]
        return Batch(messages, _Span(first, after))

    def _poll(self, consumer: GroupConsumer, max_messages: int, timeout: float | None) -> list[Any]:
        """Poll in short slices, so that an `interrupt()` ends the wait soon."""
        interrupts = self._interrupts
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = (
                _POLL_SLICE if deadline is None else min(_POLL_SLICE, deadline - time.monotonic())
            )
            records = consumer.poll_many(max_messages, max(wait, 0.0))
            if records or wait <= 0 or interrupts != self._interrupts:
                return records

    def ack(self, batch: Batch) -> None:
        """Commit the batch's end offsets of the partitions this member still owns."""
        span = batch.token
        if not isinstance(span, _Span):
            return
        consumer = self._open()
        owned = set(consumer.assignment())
        offsets = {p: o for p, o in span.next.items() if p in owned}
        moved = sorted(set(span.next) - owned)
        try:
            if offsets:
                consumer.commit(offsets)
        except CommitFencedError as error:
            moved = error.partitions
        if moved:  # at least once: the new owner reads them again from the last commit
            log.info("%s: partitions %s moved before the ack; redelivered there", self, moved)

    def nack(self, batch: Batch) -> None:
        """Seek back to the batch's start in every partition this member still owns."""
        span = batch.token
        consumer = self._consumer
        if not isinstance(span, _Span) or consumer is None:
            return
        owned = set(consumer.assignment())
        for partition, offset in span.first.items():
            if partition in owned and offset < consumer.position(partition):
                consumer.seek(partition, offset)

    def status(self) -> EndpointStatus:
        consumer = self._consumer
        if consumer is None:
            state = "closed" if self._closed else "not connected"
            return EndpointStatus(healthy=False, target=self.describe(), error=state)
        try:
            ends, committed = consumer.end_offsets(), consumer.committed()
            assignment = consumer.assignment()
        except (OSError, TwainMQError) as error:
            return EndpointStatus(healthy=False, target=self.describe(), error=str(error))
        lag = sum(max(0, end - committed.get(p, 0)) for p, end in ends.items())
        details = {"group": self._group, "partitions": len(ends), "assignment": assignment}
        return EndpointStatus(healthy=True, target=self.describe(), pending=lag, details=details)

    def describe(self) -> str:
        return self._options.describe()

    def __str__(self) -> str:
        return f"{self.describe()} (group {self._group})"

    def interrupt(self) -> None:
        self._interrupts += 1

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._closed = True
        if consumer is not None:
            consumer.close()

    def _open(self) -> GroupConsumer:
        consumer = self._consumer
        if consumer is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        return consumer


def _source_tags(topic: str, partition: int, offset: int) -> dict[str, str]:
    return {
        "mqb.src.twain_topic": topic,
        "mqb.src.twain_partition": str(partition),
        "mqb.src.twain_offset": str(offset),
    }


class TwainOutput(OutputEndpoint):
    """Appends messages to a topic, each in an envelope, under a key."""

    def __init__(self, options: TwainOptions) -> None:
        self._options = options
        self._producer: Any = None
        self._closed = False
        self._max_bytes = 0

    def connect(self) -> None:
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
        producer = self._open()
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
        self._open().write_message(self._key_of(message), record)

    def _too_large(self, record: bytes) -> EndpointError:
        return EndpointError(
            f"{self.describe()}: a message of {len(record)} bytes (with its envelope) is larger"
            f" than the topic's max_message_bytes {self._max_bytes}"
        )

    def flush(self) -> None:
        """Force what was written to disk, unless `fsync` is never (then nothing is buffered)."""
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
    if not re.fullmatch(_NAME_PATTERN, group):
        raise ConfigError(
            f"the route name {group!r} cannot be a group name: set `group`", path="twain.group"
        )
    return TwainInput(parsed, group)


def build_output(options: Mapping[str, Any], context: BuildContext) -> TwainOutput:
    """A producer writing to the topic."""
    return TwainOutput(TwainOptions.parse(options))
