"""redis_streams: a Redis stream, written with XADD, read through a consumer group.

Features
    - Output: XADD per message, as mq-bridge 1.2.0 writes it (fields ``payload``,
      ``mqb_message_id`` and one per metadata entry; see `codec`), so the two interoperate.
      `send` is one pipelined round trip per batch and returns once Redis answered every
      XADD. `maxlen` caps the stream (``MAXLEN ~`` unless ``approx_trim: false``). The
      stream is created by the first XADD. `request` XADDs and waits for the reply that a
      route in this process sends through a `response` output (mq-bridge has no Redis
      request/reply).
    - Input: a member of consumer group `group` (XREADGROUP + XACK, created with MKSTREAM
      at `$`, or `0` with `read_from_start`). `ack` XACKs; `nack` hands the batch out
      again at once, in order; closing without an ack hands the entries to the group's
      other readers at once; entries pending longer than `redelivery_timeout_ms` at any
      consumer (a dead one) are taken over with XAUTOCLAIM. Acks may come in any order.
    - ``subscriber_mode``: XREAD of entries added after connect; no group, no acks (a
      nack re-reads from the batch).
    - `status().pending`: the group's lag plus its delivered-but-unacked entries
      (XINFO GROUPS); None in subscriber_mode.
    - A Redis restart (nothing kept on disk) empties the server: the input recreates its
      group from id 0 and reads every entry added after the restart; the route sees
      retriable errors while the server is away and carries on.
    - Ids: ``mqb_message_id`` (32 hex digits); entries written by other clients get a
      stable id from stream and entry id. With ``MQB_SOURCE_METADATA=1`` inputs add
      ``mqb.src.redis_stream``, ``mqb.src.redis_entry_id`` and mq-bridge 1.2.0's
      ``mqb.src.redis_stream_id`` (the seed names no Redis fields).

URL
    redis://[[username]:password@]host[:port][/db], rediss://... (TLS), unix:///path.sock

Options (declared in `options.py`, `RedisStreamsOptions`; mq-bridge 1.2.0's names)
    url                     the server (required; a password in it is redacted)
    stream                  the stream key (default: the route's name)
    group                   input: the consumer group (default mq-bridge-{stream})
    consumer_name           input: this reader's name in the group (default: unique)
    subscriber_mode         input: XREAD new entries, no group (default false)
    block_ms                input: longest block of one read (default 5000; reads block
                            at most 100 ms at a time so interrupt() is prompt)
    read_from_start         input: a new group starts at the stream's beginning
    redelivery_timeout_ms   input: take over entries pending this long (default 60000;
                            0: never)
    maxlen, approx_trim     output: cap the stream, approximately by default
    username, password      ACL credentials (password is a secret)
    tls                     the TLS block (rediss:// turns TLS on too)
    internal_buffer_size, reader_connections
                            accepted for compatibility; not used
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.redis.options import RedisStreamsOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.redis.input import RedisStreamsInput
    from mq_bridge.endpoints.redis.output import RedisStreamsOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = RedisStreamsOptions


def build_input(options: RedisStreamsOptions, context: BuildContext) -> RedisStreamsInput:
    """A consumer-group member of the stream (a tail reader in ``subscriber_mode``)."""
    from mq_bridge.endpoints.redis.input import RedisStreamsInput

    return RedisStreamsInput(options, context)


def build_output(options: RedisStreamsOptions, context: BuildContext) -> RedisStreamsOutput:
    """An XADD writer to the stream."""
    from mq_bridge.endpoints.redis.output import RedisStreamsOutput

    return RedisStreamsOutput(options, context)
