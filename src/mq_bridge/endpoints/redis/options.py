"""Options of the `redis_streams` and `redis` endpoints (see `mq_bridge.endpoints.redis`).

Names, types and meanings are mq-bridge 1.2.0's `RedisStreamsConfig` (mq-bridge-py 0.3.2 has
no Redis endpoint). Where the peer's schema allows ``null`` for "the default", so do we: a
null is read as the option left out.
"""

from __future__ import annotations

from typing import ClassVar
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

__all__ = ["URL_SCHEMES", "RedisOptions", "RedisStreamsOptions"]

#: The URL schemes redis-py connects to (``rediss`` is TLS).
URL_SCHEMES = frozenset({"redis", "rediss", "unix"})


class _RedisServer(Options):
    """What every Redis endpoint needs to reach the server."""

    # Not a `secret_field`: that would make every endpoint's `url` key secret. A password
    # in the URL is hidden wherever config text is shown (config.redaction.redact_text).
    url: str = Field(
        min_length=1,
        description="Redis URL, `redis://` or `rediss://` for TLS. Userinfo is treated as a "
        "secret.",
    )
    username: str | None = Field(
        None, description="Optional username for authentication (Redis ACL)."
    )
    password: str | None = secret_field(None, description="Optional password for authentication.")
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}),
        description="TLS: a private CA in `ca_file`, a client certificate in `cert_file` and "
        "`key_file`.",
    )

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="after")
    def _url_is_redis(self) -> _RedisServer:
        try:
            parts = urlsplit(self.url)
            port = parts.port  # ValueError for a port that is not a number in range
        except ValueError as error:
            raise OptionError("url", f"not a valid URL: {error}") from None
        if parts.scheme.lower() not in URL_SCHEMES:
            raise OptionError(
                "url", f"the scheme must be redis://, rediss:// or unix://, not {parts.scheme!r}"
            )
        if parts.scheme.lower() != "unix" and not parts.hostname:
            raise OptionError("url", "the URL names no host (redis://host:6379)")
        del port
        return self

    def server(self) -> str:
        """host:port (or the socket path) without credentials, for messages and status."""
        parts = urlsplit(self.url)
        if parts.scheme.lower() == "unix":
            return parts.path
        return f"{parts.hostname}:{parts.port or 6379}"


class RedisStreamsOptions(_RedisServer):
    """A Redis stream: XADD out; a consumer group (XREADGROUP + XACK) or XREAD in.

    Publishers `XADD` to the stream; consumers read via a consumer group (`XREADGROUP` +
    `XACK`) by default, or ephemerally via `XREAD` from new messages when `subscriber_mode`
    is set.
    """

    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset(
        {
            "block_ms",
            "redelivery_timeout_ms",
            "approx_trim",
            "internal_buffer_size",
            "reader_connections",
        }
    )

    stream: str | None = Field(
        None,
        min_length=1,
        description="The stream key to publish to or read from. Defaults to the route name.",
    )
    group: str | None = Field(
        None,
        min_length=1,
        description="(Consumer) Group name. Defaults to `mq-bridge-{stream}`; ignored in "
        "`subscriber_mode`.",
    )
    consumer_name: str | None = Field(
        None,
        min_length=1,
        description="(Consumer) Consumer name within the group. Defaults to a unique "
        "per-instance id.",
    )
    subscriber_mode: bool = Field(
        False,
        description="(Consumer) Read ephemerally via `XREAD` from new messages (no "
        "group/acks). Default false.",
    )
    block_ms: int | None = Field(
        5000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Consumer) Block timeout in milliseconds for each read (bounded by the "
        "receive timeout; 0: never block, poll). Defaults to 5000ms.",
    )
    read_from_start: bool = Field(
        False,
        description='(Consumer) On group creation, start from the stream beginning ("0") not '
        '"$". Default false.',
    )
    redelivery_timeout_ms: int | None = Field(
        60_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Consumer) Redeliver entries pending >= this long via `XAUTOCLAIM`; 0 "
        "disables. Default 60000ms.",
    )
    maxlen: int | None = Field(
        None,
        ge=0,
        le=MAX_INT64,
        description="(Publisher) If set, cap the stream length with `XADD MAXLEN`.",
    )
    approx_trim: bool | None = Field(
        True,
        description="(Publisher) Use approximate (`~`) trimming when `maxlen` is set. "
        "Defaults to true.",
    )
    internal_buffer_size: int | None = Field(
        128,
        ge=0,
        description="Accepted for compatibility: receive reads straight from Redis, with no "
        "internal buffer.",
    )
    reader_connections: int | None = Field(
        1,
        ge=0,
        description="Accepted for compatibility: one reader connection per input (run more "
        "routes or consumers on the group to read in parallel).",
    )

    @property
    def block_seconds(self) -> float:
        return (5000 if self.block_ms is None else self.block_ms) / 1000

    @property
    def redelivery_timeout(self) -> int:
        """Milliseconds (0: no redelivery of other consumers' stale entries)."""
        return 60_000 if self.redelivery_timeout_ms is None else self.redelivery_timeout_ms

    def stream_name(self, route_name: str) -> str:
        """`stream`, else the route's name."""
        return self.stream or route_name

    def describe(self, route_name: str) -> str:
        return f"redis_streams:{self.server()}/{self.stream_name(route_name)}"


class RedisOptions(_RedisServer):
    """Redis pub/sub channels: PUBLISH out, SUBSCRIBE in (at most once, no persistence)."""

    channel: str | None = Field(
        None,
        min_length=1,
        description="The channel to publish to or subscribe to (a glob pattern with "
        "`pattern: true`). Defaults to the route name.",
    )
    pattern: bool = Field(
        False, description="(Consumer) Subscribe with PSUBSCRIBE: `channel` is a glob pattern."
    )

    def channel_name(self, route_name: str) -> str:
        return self.channel or route_name

    def describe(self, route_name: str) -> str:
        return f"redis:{self.server()}/{self.channel_name(route_name)}"
