"""Options of the `nats` endpoint (see `mq_bridge.endpoints.nats`).

The names, types, defaults and meanings are mq-bridge's ``NatsConfig`` (0.3.2 and 1.2.0:
1.2.0 adds `deduplicate` and `source_metadata`). Where the peer's schema allows ``null`` for
an option with a documented default, ``null`` means that default here too.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from mq_bridge.config.declarations import (
    MAX_INT64,
    MAX_MILLISECONDS,
    OptionError,
    Options,
    secret_field,
)
from mq_bridge.endpoints.kit.tls import TlsOptions

__all__ = ["DeliverPolicy", "NatsOptions", "durable_name", "queue_group", "stream_for_subject"]

DeliverPolicy = Literal["all", "last", "new", "last_per_subject"]

#: URL schemes nats-py speaks (``nats+tls`` is read as ``tls``).
_SCHEMES = frozenset({"nats", "tls", "nats+tls", "ws", "wss"})
#: Stream and consumer names: no whitespace, no ``.``, ``*``, ``>``, path separators.
_BAD_NAME = re.compile(r"[\s.*>/\\]")
#: Subjects: dot-separated non-empty tokens without whitespace.
_SUBJECT = re.compile(r"[^\s.]+(\.[^\s.]+)*")


class NatsOptions(Options):
    """NATS core and JetStream subjects (mq-bridge's ``NatsConfig``)."""

    url: str = Field(
        min_length=1,
        description="Comma-separated list of NATS server URLs (e.g. "
        '"nats://localhost:4222,nats://localhost:4223"). If it contains userinfo, it is '
        "treated as a secret.",
    )
    subject: str | None = Field(
        None,
        description="The NATS subject to publish to or subscribe to (required). A stream the "
        "endpoint creates captures `{stream}.>` when the subject starts with `{stream}.`, "
        "else the subject itself.",
    )
    stream: str | None = Field(
        None,
        description="The JetStream stream name. Without it, the stream that already captures "
        "the subject is used, or one named after the subject is created.",
    )
    username: str | None = Field(None, description="Optional username for authentication.")
    password: str | None = secret_field(None, description="Optional password for authentication.")
    token: str | None = secret_field(None, description="Optional token for authentication.")
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}), description="TLS configuration."
    )
    request_reply: bool = Field(
        False,
        description="(Publisher only) Send each message as a native NATS request (with its "
        "headers) and wait for the reply.",
    )
    request_timeout_ms: int | None = Field(
        30_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Publisher only) Timeout for request-reply operations in milliseconds.",
    )
    delayed_ack: bool = Field(
        False,
        description="(Publisher only) If true, do not wait for the broker's acknowledgement "
        "(JetStream PubAck; core NATS: the flush) before a send returns.",
    )
    deduplicate: bool = Field(
        False,
        description="(Publisher only, JetStream) Publish a `Nats-Msg-Id` header (the message "
        "id) so JetStream drops redeliveries within the stream's duplicate window.",
    )
    no_jetstream: bool = Field(
        False,
        description="Use core NATS (fire-and-forget, no persistence) instead of JetStream.",
    )
    subscriber_mode: bool = Field(
        False,
        description="(Consumer only) An ephemeral subscriber receiving new messages, instead of "
        "the durable consumer.",
    )
    source_metadata: bool = Field(
        False,
        description="(Consumer only) Add the `mqb.src.nats_*` source positions (as "
        "MQB_SOURCE_METADATA=1 does).",
    )
    stream_max_messages: int | None = Field(
        1_000_000,
        ge=-1,
        le=MAX_INT64,
        description="Maximum number of messages in the stream, if the endpoint creates it.",
    )
    stream_max_bytes: int | None = Field(
        1024 * 1024 * 1024,
        ge=-1,
        le=MAX_INT64,
        description="Maximum total bytes in the stream, if the endpoint creates it.",
    )
    deliver_policy: DeliverPolicy | None = Field(
        None,
        description='(Consumer only) Where a new consumer starts: "all" (default), "last", '
        '"new" (default in subscriber mode) or "last_per_subject".',
    )
    prefetch_count: int | None = Field(
        10_000,
        ge=0,
        description="(Consumer only) The consumer's max ack pending: most messages handed out "
        "and not yet acknowledged (0: the server's default).",
    )
    shared: bool | None = Field(
        True,
        description="Share one NATS client per connection settings; false forces a dedicated "
        "connection.",
    )

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset(
        {
            "request_timeout_ms",
            "stream_max_messages",
            "stream_max_bytes",
            "prefetch_count",
            "shared",
        }
    )

    @model_validator(mode="after")
    def _consistent(self) -> NatsOptions:
        for server in self.url.split(","):
            _check_server(server.strip())
        if not self.subject:
            raise OptionError("subject", "the nats endpoint needs a `subject`")
        if not _SUBJECT.fullmatch(self.subject):
            raise OptionError("subject", f"not a valid NATS subject: {self.subject!r}")
        if self.stream is not None and (not self.stream or _BAD_NAME.search(self.stream)):
            raise OptionError(
                "stream", f"a stream name has no whitespace, '.', '*', '>', '/': {self.stream!r}"
            )
        if self.password is not None and self.username is None:
            raise OptionError("password", "a password needs a `username`")
        return self

    @property
    def servers(self) -> list[str]:
        """The server URLs as nats-py takes them (``nats+tls://`` becomes ``tls://``)."""
        servers = [server.strip() for server in self.url.split(",") if server.strip()]
        return [_nats_py_url(server) for server in servers]

    @property
    def request_timeout(self) -> float:
        return (self.request_timeout_ms or 0) / 1000

    @property
    def effective_deliver_policy(self) -> DeliverPolicy:
        """The seed's rule: a subscriber receives only new messages unless told otherwise."""
        if self.deliver_policy is not None:
            return self.deliver_policy
        return "new" if self.subscriber_mode else "all"

    def describe(self) -> str:
        kind = "nats" if self.no_jetstream else "nats+js"
        return f"{kind}:{self.subject}"


def _check_server(server: str) -> None:
    if not server:
        raise OptionError("url", "an empty server in the list")
    if "://" not in server:
        server = f"nats://{server}"
    try:
        parts = urlsplit(server)
        port = parts.port
    except ValueError as error:
        raise OptionError("url", f"not a server URL ({error})") from None
    if parts.scheme.lower() not in _SCHEMES:
        schemes = ", ".join(f"{scheme}://" for scheme in sorted(_SCHEMES))
        raise OptionError("url", f"unsupported scheme {parts.scheme!r}: use {schemes}")
    if not parts.hostname:
        raise OptionError("url", "the server URL has no host")
    if port == 0:
        raise OptionError("url", "port 0 is not a server port")


def _nats_py_url(server: str) -> str:
    if "://" not in server:
        return f"nats://{server}"
    scheme, rest = server.split("://", 1)
    return f"tls://{rest}" if scheme.lower() == "nats+tls" else server


def stream_for_subject(subject: str) -> str:
    """The name of the stream the endpoint creates for `subject` when no `stream` is given.

    >>> stream_for_subject("orders.eu.*")
    'orders_eu_all'
    """
    name = subject.replace("*", "all").replace(">", "rest")
    return re.sub(r"[\s.*>/\\]", "_", name)


def durable_name(stream: str, subject: str) -> str:
    """mq-bridge's durable consumer name, so a route resumes where the peer's left off.

    >>> durable_name("orders", "orders.eu")
    'mq-bridge-orders-orders-eu'
    """
    return stream_for_subject(f"mq-bridge-{stream}-{subject.replace('.', '-')}")


def queue_group(stream: str | None, subject: str) -> str:
    """mq-bridge's queue group for a core-NATS consumer (`no_jetstream`, not a subscriber)."""
    return f"mq-bridge-{(stream or subject).replace('.', '-')}"
