"""JetStream setup for the `nats` endpoint: the stream and the consumer, as mq-bridge makes
them (coroutines for the loop thread; see `connection.run`).

- The stream: `stream` when given, created when missing with `stream_max_messages` /
  `stream_max_bytes`, capturing ``{stream}.>`` when the subject starts with ``{stream}.``
  (mq-bridge's scope) or else the subject itself. Without `stream`: the stream that already
  captures the subject, or a new one named after it (`stream_for_subject`), so the seed's
  ``{"nats": {"subject": "orders", "url": ...}}`` runs as printed.
- The consumer: a durable pull consumer named ``mq-bridge-{stream}-{subject with . as -}``
  (mq-bridge's name: a route resumes where the peer's left off), filtered on the subject,
  explicit acks, `prefetch_count` as its max ack pending; in `subscriber_mode` an ephemeral
  one, deleted on close (and by the server after `EPHEMERAL_IDLE` without pulls).
"""

from __future__ import annotations

import logging
from typing import Any

import nats.js.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StreamConfig

from mq_bridge.endpoints.nats.connection import API_TIMEOUT, FastClient
from mq_bridge.endpoints.nats.options import NatsOptions, durable_name, stream_for_subject
from mq_bridge.errors import ConfigError, EndpointError

__all__ = ["consumer_info", "delete_consumer", "ensure_consumer", "ensure_stream"]

log = logging.getLogger("mq_bridge.endpoints.nats")

EPHEMERAL_IDLE = 300.0
_NO_STORAGE = 10047
_SUBJECT_MISMATCH = {10093, 10139}  # filter subject is not in the stream / overlaps
_POLICIES = {
    "all": DeliverPolicy.ALL,
    "last": DeliverPolicy.LAST,
    "new": DeliverPolicy.NEW,
    "last_per_subject": DeliverPolicy.LAST_PER_SUBJECT,
}


async def ensure_stream(client: FastClient, options: NatsOptions) -> str:
    """The name of the stream for `options`, created first when it does not exist."""
    js = client.jetstream(timeout=API_TIMEOUT)
    subject = str(options.subject)
    name = options.stream
    if name is None:
        try:
            return str(await js.find_stream_name_by_subject(subject))
        except nats.js.errors.NotFoundError:
            name = stream_for_subject(subject)
    try:
        await js.stream_info(name)
        return name
    except nats.js.errors.NotFoundError:
        pass
    scope = f"{name}.>" if subject.startswith(f"{name}.") else subject
    config = StreamConfig(
        name=name,
        subjects=[scope],
        max_msgs=options.stream_max_messages,
        max_bytes=options.stream_max_bytes,
    )
    try:
        await js.add_stream(config)
        log.info("nats: created the stream %s for %s", name, scope)
    except nats.js.errors.APIError as error:
        if error.err_code == _NO_STORAGE:
            raise EndpointError(
                f"nats: the server has no storage left for stream {name!r} "
                f"(stream_max_bytes {options.stream_max_bytes}): {error.description}"
            ) from error
        if "already in use" not in str(error.description):
            raise _setup_error(error, name, subject) from error
    return name


async def ensure_consumer(client: FastClient, stream: str, options: NatsOptions) -> str:
    """The name of the pull consumer reading `stream` for `options` (created if missing)."""
    js = client.jetstream(timeout=API_TIMEOUT)
    subject = str(options.subject)
    durable = None if options.subscriber_mode else durable_name(stream, subject)
    if durable is not None:
        try:
            await js.consumer_info(stream, durable)
            return durable
        except nats.js.errors.NotFoundError:
            pass
    config = ConsumerConfig(
        durable_name=durable,
        filter_subject=subject,
        deliver_policy=_POLICIES[options.effective_deliver_policy],
        ack_policy=AckPolicy.EXPLICIT,
        max_ack_pending=options.prefetch_count or None,
        inactive_threshold=EPHEMERAL_IDLE if durable is None else None,
    )
    try:
        info = await js.add_consumer(stream, config)
    except nats.js.errors.APIError as error:
        raise _setup_error(error, stream, subject) from error
    return str(info.name)


async def consumer_info(client: FastClient, stream: str, consumer: str) -> Any:
    return await client.jetstream(timeout=API_TIMEOUT).consumer_info(stream, consumer)


async def delete_consumer(client: FastClient, stream: str, consumer: str) -> None:
    try:
        await client.jetstream(timeout=API_TIMEOUT).delete_consumer(stream, consumer)
    except nats.js.errors.NotFoundError:
        pass


def _setup_error(error: nats.js.errors.APIError, stream: str, subject: str) -> Exception:
    """A mismatch between `stream` and `subject` is a config error: retrying cannot fix it."""
    message = f"nats: JetStream setup failed (stream {stream!r}, subject {subject!r}): "
    if error.err_code in _SUBJECT_MISMATCH or "subject" in str(error.description).lower():
        return ConfigError(
            message + f"{error.description}; the stream's subjects must cover the subject",
            "nats.subject",
        )
    return EndpointError(message + str(error.description or error))
