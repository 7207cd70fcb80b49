"""nats: NATS subjects, through JetStream (stored, acknowledged) or core NATS.

Features
    - Input (JetStream, the default): a durable pull consumer named as mq-bridge names it,
      ``mq-bridge-{stream}-{subject with . as -}`` (so a route resumes where the peer's left
      off); `receive(max)` returns what the consumer has, up to `max` (a backlog gives full
      batches), waiting only for the first message. Ack per message (acks in any order),
      nack = Nak (redelivered at once, in order); delivered-but-unreturned messages are
      Nak'ed at close. `status().pending` is the consumer's ``num_pending``.
    - `subscriber_mode`: an ephemeral consumer that sees new messages (unless
      `deliver_policy` says otherwise), deleted on close.
    - The stream: `stream`, created when missing (`stream_max_messages`, `stream_max_bytes`;
      it captures ``{stream}.>`` when the subject starts with ``{stream}.``, else the
      subject). Without `stream`, the stream that captures the subject, or one named after
      it, so ``Consumer.from_config({"nats": {"subject": "orders", "url": ...}})`` works.
    - Output: a send returns once JetStream acknowledged every message (PubAck; a batch is
      written at once and its PubAcks awaited together); core NATS: once the server has
      read them (a flush). `delayed_ack` opts out of the wait. `deduplicate` adds
      ``Nats-Msg-Id`` (the message id) for JetStream's duplicate window.
    - Request/reply: `request_reply` sends native NATS requests with headers; a core input
      answers requests with what its route's `response` output sends.
    - Wire: metadata travels as headers, the id as ``mq_bridge.message_id`` (32 hex digits,
      as mq-bridge writes it). A message without that header gets a stable id from its
      stream and stream sequence. With ``MQB_SOURCE_METADATA=1`` (or `source_metadata`)
      inputs add ``mqb.src.nats_subject`` and, on JetStream, ``mqb.src.nats_stream_sequence``.
    - Connections: one nats-py client per server and credentials, shared (`shared`), for
      the JetStream API and core subscriptions; on plain ``nats://`` servers each publisher
      and pull consumer also has a socket of its own that the caller's thread writes and
      reads (`direct`: no thread hop per call). A refused server fails `connect()` at once,
      a lost connection is reconnected (calls raise the retriable `EndpointUnavailableError`
      meanwhile).
    - Core NATS (`no_jetstream`): a queue subscription (group ``mq-bridge-{stream or
      subject}``), or a plain one in `subscriber_mode`; nothing is stored or acknowledged.

URL
    nats://[user:password@]host:port[,nats://host2:port...] (tls://, nats+tls:// or a `tls`
    block for TLS; ws://, wss://)

Options (declared in `options.py`, `NatsOptions`; mq-bridge's names)
    url                  the server(s) (required)
    subject              the subject (required)
    stream               the JetStream stream (default: found or made from the subject)
    username, password, token   credentials;  tls   the TLS block
    request_reply, request_timeout_ms   output: native requests (default false, 30000)
    delayed_ack          output: do not wait for the broker (default false)
    deduplicate          output: send Nats-Msg-Id (default false)
    no_jetstream         core NATS instead of JetStream (default false)
    subscriber_mode      input: ephemeral subscriber (default false)
    source_metadata      input: add mqb.src.* (default false; MQB_SOURCE_METADATA=1 too)
    stream_max_messages, stream_max_bytes   limits of a stream it creates (1,000,000; 1 GiB)
    deliver_policy       input: all | last | new | last_per_subject (default all; new for
                         a subscriber)
    prefetch_count       input: the consumer's max ack pending (default 10000)
    shared               share the connection (default true)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.nats.options import NatsOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.nats.input import NatsInput
    from mq_bridge.endpoints.nats.output import NatsOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = NatsOptions


def build_input(options: NatsOptions, context: BuildContext) -> NatsInput:
    """A JetStream pull consumer, or a core subscription with `no_jetstream`."""
    from mq_bridge.endpoints.nats.input import NatsInput

    return NatsInput(options, context)


def build_output(options: NatsOptions, context: BuildContext) -> NatsOutput:
    """A publisher to the subject (a requester with `request_reply`)."""
    from mq_bridge.endpoints.nats.output import NatsOutput

    return NatsOutput(options, context)
