"""twain: a topic in a `twainmq` store (a directory): the durable, server-free default.

This module is the output and the builders; `twain_reader` is the input, `twain_options` the
options, `twain_records` the pure envelope and key encoding.

Features
    - Output: writes each message to the topic under a key (see `twain_records` for how the
      key is chosen and for the envelope that keeps the message's id and metadata; a plain
      twainmq consumer reads the record as bytes). A batch (`send`, what routes use) is
      written with one `write_messages` call before `send` returns, so a route acks its
      source only once the records are in the log. A write the store's disk refuses (full,
      failing) raises `TwainStorageError` (retriable): a route holds the batch and retries
      it until the disk takes writes again.
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

URL
    none: `root` names the store's directory, `topic` the topic.

Options (declared in `options.py`, `TwainOptions`)
    root                the store's directory (required; created if missing)
    topic               the topic name (required)
    group               input: the consumer group (default: the route's name; a
                        `Consumer.from_config` has the name "consumer", so set it there)
    start_from          input: start | now, where a group with no commit starts (default start)
    session_timeout_ms  input: a member that does not poll for this long is expelled and its
                        partitions move (default 10000): keep it above a handler's longest run
    commit_interval_ms  input: commit acks at most this often (default 0: each ack commits
                        before it returns). A commit is one record appended to the group's
                        commit log (twainmq; docs/design.md, "Group commits"); with e.g.
                        100, a crash redelivers up to 100 ms more messages (never loses
                        any). Idle inputs, handed-over partitions and close commit what is
                        left at once
    create              create a missing topic: {partitions: 1, key_type: u16, and optionally
                        max_message_bytes, segment_bytes, retention_bytes, retention_seconds}
    exactly_once_output input: the twain topic (same store) this route writes to: messages
                        carry their source (`mqb.twain.eos`), and after a crash a message
                        whose output is already there is not handed out again (exactly-once;
                        the handler must return one message with the input's metadata)
    key_from            output: the metadata field whose value is the key (default: the id)
    fsync               output: never (default: safe against a process crash; the OS writes
                        it to disk later) | batch (each `send` is synced before it returns;
                        single sends are synced in groups every 10 ms, and on flush/close) |
                        always (every write is synced before it returns). Input: the same
                        choice for commits (twainmq's commit_fsync: never, the default, is
                        safe against a process crash; always syncs each commit before the ack
                        returns, concurrent commits sharing one sync; batch within 10 ms)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.twain.options import NAME_PATTERN, TwainOptions
from mq_bridge.errors import ConfigError

if TYPE_CHECKING:
    from mq_bridge.endpoints.twain.input import TwainInput
    from mq_bridge.endpoints.twain.output import TwainOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = TwainOptions

#: The endpoints registered from this package: config name -> the module that builds it
#: (the entries of `mq_bridge.endpoints.registry.ENDPOINT_MODULES` that point here).
REGISTRATIONS: dict[str, str] = {
    "twain": "mq_bridge.endpoints.twain",
    "sled": "mq_bridge.endpoints.twain.sled",
}


def build_input(options: TwainOptions, context: BuildContext) -> TwainInput:
    """A member of `group` (default: the route's name) reading the topic."""
    from mq_bridge.endpoints.twain.input import TwainInput

    group = options.group or context.route_name
    if not re.fullmatch(NAME_PATTERN, group):
        raise ConfigError(
            f"the route name {group!r} cannot be a group name: set `group`", path="twain.group"
        )
    return TwainInput(options, group, context.source_metadata)


def build_output(options: TwainOptions, context: BuildContext) -> TwainOutput:
    """A producer writing to the topic."""
    from mq_bridge.endpoints.twain.output import TwainOutput

    return TwainOutput(options)
