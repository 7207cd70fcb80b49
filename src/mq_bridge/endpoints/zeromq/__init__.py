"""zeromq: ZeroMQ sockets, brokerless: push/pull, pub/sub and req/rep.

Features
    - Input: PULL (default), SUB (filtering on `topic` as a prefix) or REP; output: PUSH
      (default), PUB (sending `topic` as a first frame) or REQ. Either side binds (`bind`)
      or connects; any number of peers may connect to a bound socket.
    - Wire (`format`): `json` (default, mq-bridge-py 0.3.2's) sends a batch as one frame
      holding a JSON array of envelopes, so the id and metadata travel; `raw` (the payload
      alone) and `raw_framed` (mq-bridge 1.2.0's default: a JSON metadata frame, then the
      payload) send one ZeroMQ message per message and carry no id. See `codec`.
    - Request/reply: a REQ output's `request()` returns the reply; a REP input answers each
      request with what its route's `response` output sends (a JSON array of messages),
      once the request's messages are acked. A REQ `send` returns once the responder
      answered: the only ZeroMQ pattern where a send is confirmed.
    - Acks: ZeroMQ has none. A PUSH `send` returns once libzmq queued the frames for a
      connected peer (none within `request_timeout_ms`: `EndpointUnavailableError`); a PUB
      `send` once the socket has them (no subscriber: dropped, as ZeroMQ does). Input
      nack = redelivered by this input from its own memory (lost at close).
    - ``MQB_SOURCE_METADATA=1``: a SUB input adds ``mqb.src.zeromq_topic``.
    - Limits: `max_message_size` (64 MiB) disconnects a peer that sends more; a frame that
      is not an envelope is delivered as raw bytes (a warning says why, when it looked
      like one).

URL
    tcp://host:port, ipc:///path, inproc://name (with `bind`: tcp://*:port)

Options (declared in `options.py`, `ZeroMqOptions`; mq-bridge's names)
    url                  the address (required)
    socket_type          push | pull | pub | sub | req | rep (default pull / push)
    topic                SUB prefix filter / PUB topic frame
    bind                 bind instead of connect (default false)
    format               json | raw | raw_framed (default json)
    request_timeout_ms   REQ round trip, and how long a send waits for a peer (30000)
    max_message_size     input: the largest accepted message (64 MiB)
    internal_buffer_size, backend   accepted for mq-bridge configs; no effect
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.zeromq.options import ZeroMqOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.zeromq.input import ZeroMqInput
    from mq_bridge.endpoints.zeromq.output import ZeroMqOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = ZeroMqOptions


def build_input(options: ZeroMqOptions, context: BuildContext) -> ZeroMqInput:
    """A PULL, SUB or REP socket."""
    from mq_bridge.endpoints.zeromq.input import ZeroMqInput

    return ZeroMqInput(options, context)


def build_output(options: ZeroMqOptions, context: BuildContext) -> ZeroMqOutput:
    """A PUSH, PUB or REQ socket."""
    from mq_bridge.endpoints.zeromq.output import ZeroMqOutput

    return ZeroMqOutput(options, context)
