"""Options of the `amqp` endpoint (see `mq_bridge.endpoints.amqp`).

The names, types, defaults and meanings are mq-bridge's ``AmqpConfig`` (0.3.2 and 1.2.0;
1.2.0 added `source_metadata`), so a peer's config runs unchanged. `shared` is ours.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, model_validator

from mq_bridge.config.declarations import OptionError, Options, secret_field
from mq_bridge.endpoints.kit.tls import TlsOptions

__all__ = ["DEFAULT_PREFETCH", "AmqpOptions"]

#: The peer's documented default for `prefetch_count`.
DEFAULT_PREFETCH = 100
_SCHEMES = ("amqp", "amqps")


class AmqpOptions(Options):
    """An AMQP 0-9-1 (RabbitMQ) queue, or a fanout exchange."""

    # Not a secret field as a whole: redaction masks the password inside any URL.
    url: str = Field(
        min_length=1,
        description="AMQP connection URI, amqp://[user:password@]host:port/vhost "
        "(amqps:// for TLS). A password in it is redacted from logs and errors.",
    )
    queue: str | None = Field(None, description="The AMQP queue name.")
    subscribe_mode: bool = Field(
        False,
        description="(Consumer only) If true, act as a Subscriber (fan-out): an exclusive, "
        "auto-deleted queue bound to the fanout `exchange` (default: the queue's name).",
    )
    source_metadata: bool = Field(
        False,
        description="(Consumer only) Include the mqb.src.amqp_* source positions "
        "(as MQB_SOURCE_METADATA=1 does).",
    )
    username: str | None = Field(None, description="Optional username for authentication.")
    password: str | None = secret_field(None, description="Optional password for authentication.")
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}), description="TLS configuration."
    )
    exchange: str | None = Field(
        None, description="The exchange to publish to or bind the queue to (fanout)."
    )
    prefetch_count: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="(Consumer only) Number of messages to prefetch. Defaults to 100.",
    )
    no_persistence: bool = Field(
        False,
        description="If true, declare queues as non-durable (transient) and publish transient "
        "messages. Defaults to false.",
    )
    no_declare_queue: bool = Field(
        False,
        description="(Publisher only) If true, do not declare the queue: it must exist "
        "(a send to a missing queue then fails). Defaults to false.",
    )
    delayed_ack: bool = Field(
        False,
        description="(Publisher only) If true, do not wait for the broker's confirm: a send "
        "returns once the bytes are written. Defaults to false.",
    )
    shared: bool = Field(
        True, description="Share one connection per server and credentials (one channel each)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> AmqpOptions:
        scheme = urlsplit(self.url).scheme.lower()
        if scheme not in _SCHEMES:
            raise OptionError("url", f"the scheme must be amqp:// or amqps://, not {scheme!r}://")
        if not self.queue and not self.exchange and self.subscribe_mode:
            raise OptionError("exchange", "subscribe_mode needs an `exchange` (or a `queue`)")
        return self

    @property
    def prefetch(self) -> int:
        """The consumer's prefetch (0 means no limit, as in AMQP)."""
        return DEFAULT_PREFETCH if self.prefetch_count is None else self.prefetch_count

    @property
    def fanout_exchange(self) -> str:
        """The exchange a subscriber binds to: `exchange`, else the queue's name."""
        return self.exchange or self.queue or ""

    def describe(self) -> str:
        """``amqp://host:port/vhost/queue`` (or ``.../exchange``), without credentials."""
        parts = urlsplit(self.url)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        if self.subscribe_mode:
            place = f"fanout:{self.fanout_exchange}"
        elif self.queue:
            place = self.queue
        else:
            place = f"exchange:{self.exchange}" if self.exchange else "(reply_to)"
        return f"{parts.scheme}://{host}{port}/{place}"
