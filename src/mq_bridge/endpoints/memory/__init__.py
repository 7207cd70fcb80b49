"""memory: in-process topics, for tests, local pipelines and request/reply inside one process.

Features
    - A topic is a process-wide FIFO named by `topic`; queue-mode readers compete for its
      messages, `subscribe_mode` readers each get every message published after they
      subscribed (broadcast).
    - `capacity` bounds a topic: a writer waits for room up to `send_timeout_ms`, then gets
      a clear `SendTimeoutError` (a route retries it with backoff) instead of blocking forever.
    - Nack always requeues at the front, in order (holding a batch costs nothing in memory),
      so `enable_nack` is accepted for compatibility and never needed: nothing is lost.
    - `request_reply`: `send` waits for each message's reply, `request` returns it; the reply
      is whatever a route sends through a `response` output with the same `correlation_id`.
    - With ``MQB_SOURCE_METADATA=1`` inputs add ``mqb.src.memory_topic``.

URL
    ``memory://name`` (in `url` or `topic`), or the bare topic name.

Options (declared in `options.py`, `MemoryOptions`)
    topic / url          topic name, optionally ``memory://name`` (required)
    capacity             max queued messages per channel; default 100, 0 = unbounded. The
                         first user creates the topic; a later, larger capacity grows it
    request_reply        output: wait for a reply to each message (default false)
    request_timeout_ms   output: how long to wait for a reply (default 30000)
    subscribe_mode       input: broadcast subscriber instead of a queue reader (default false)
    enable_nack          a message whose handler failed (not a NonRetryableError) is
                         redelivered with backoff; without it, dropped and counted, as in
                         mq-bridge-py (a stopping route's nack requeues either way)
    send_timeout_ms      output: max wait for room in a full topic (default 10000)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.memory.options import MemoryOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.memory.input import MemoryInput
    from mq_bridge.endpoints.memory.output import MemoryOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = MemoryOptions

#: The endpoints registered from this package: config name -> the module that builds it
#: (the entries of `mq_bridge.endpoints.registry.ENDPOINT_MODULES` that point here).
REGISTRATIONS: dict[str, str] = {
    "memory": "mq_bridge.endpoints.memory",
    "stream_buffer": "mq_bridge.endpoints.memory.stream_buffer",
}


def build_input(options: MemoryOptions, context: BuildContext) -> MemoryInput:
    """A queue reader, or a broadcast subscriber with ``subscribe_mode: true``."""
    from mq_bridge.endpoints.memory.input import MemoryInput
    from mq_bridge.endpoints.memory.topic import get_topic

    topic = get_topic(options.topic_name, options.capacity)
    reader = MemoryInput(topic, options.subscribe_mode, context.source_metadata)
    # A stopping route's nack always requeues here; a message whose handler failed without a
    # decision is redelivered only with enable_nack, as mq-bridge-py does (dropped without).
    reader.redelivers = options.enable_nack
    return reader


def build_output(options: MemoryOptions, context: BuildContext) -> MemoryOutput:
    """A publisher to the topic (a requester with ``request_reply: true``)."""
    from mq_bridge.endpoints.memory.output import MemoryOutput
    from mq_bridge.endpoints.memory.topic import get_topic

    return MemoryOutput(get_topic(options.topic_name, options.capacity), options, context.replies)
