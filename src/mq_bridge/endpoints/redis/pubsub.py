"""redis: Redis pub/sub channels: PUBLISH out, SUBSCRIBE in (at most once).

Features
    - Input: SUBSCRIBE to `channel` (PSUBSCRIBE with ``pattern: true``); `connect` returns
      once Redis confirmed the subscription. Nothing is kept for an absent subscriber, and
      ack/nack do nothing: at most once. After a lost connection the input subscribes
      again; what was published meanwhile is gone.
    - Output: PUBLISH of each payload (a batch is one pipelined round trip); `send`
      returns once Redis answered, which says it took the message, not that anyone
      received it.
    - Only the payload travels (plain Redis clients interoperate): a received message has
      a new id and no metadata. With ``MQB_SOURCE_METADATA=1`` inputs add
      ``mqb.src.redis_channel`` (and ``mqb.src.redis_pattern``).
    - `status().pending` is None: pub/sub has no backlog.
    - mq-bridge 1.2.0 has no pub/sub endpoint; it reads a ``redis:`` key as an alias of
      ``redis_streams``. Here ``redis`` is pub/sub: use ``redis_streams`` for streams.

URL
    redis://[[username]:password@]host[:port][/db], rediss://... (TLS), unix:///path.sock

Options (declared in `options.py`, `RedisOptions`)
    url                 the server (required; a password in it is redacted)
    channel             the channel (default: the route's name)
    pattern             input: `channel` is a glob pattern (PSUBSCRIBE)
    username, password  ACL credentials (password is a secret)
    tls                 the TLS block (rediss:// turns TLS on too)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.redis.options import RedisOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.redis.channels import RedisPublisher, RedisSubscriber

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = RedisOptions


def build_input(options: RedisOptions, context: BuildContext) -> RedisSubscriber:
    """A subscriber to the channel (or pattern)."""
    from mq_bridge.endpoints.redis.channels import RedisSubscriber

    return RedisSubscriber(options, context)


def build_output(options: RedisOptions, context: BuildContext) -> RedisPublisher:
    """A publisher to the channel."""
    from mq_bridge.endpoints.redis.channels import RedisPublisher

    return RedisPublisher(options, context)
