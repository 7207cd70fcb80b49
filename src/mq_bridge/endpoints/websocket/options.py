"""Options of the `websocket` endpoint (see `mq_bridge.endpoints.websocket`).

The names, types, defaults and meanings are mq-bridge's ``WebSocketConfig`` (0.3.2, plus
1.2.0's `tls`, `basic_auth` and `max_connections`), and two of ours: `max_message_bytes`
and `request_timeout_ms`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from mq_bridge.config.declarations import MAX_MILLISECONDS, OptionError, Options, secret_field
from mq_bridge.endpoints.kit.hosts import url_host_problem
from mq_bridge.endpoints.kit.tls import TlsOptions

__all__ = ["WebSocketOptions"]

ExecutionMode = Literal["auto", "direct_only", "routed"]


class WebSocketOptions(Options):
    """WebSocket connection configuration (mq-bridge's ``WebSocketConfig``)."""

    model_config = {**Options.model_config, "title": "WebSocketConfig"}

    # Not a `secret_field`: that would make every endpoint's `url` key secret. A password
    # in it (``ws://user:pass@host``) is redacted like any URL's userinfo.
    url: str = Field(
        min_length=1,
        description='For consumers, the listen address (e.g. "0.0.0.0:9000"). For publishers, '
        "the target URL (ws:// or wss://).",
    )
    path: str | None = Field(
        None,
        description="(Consumer only) Optional request path filter. If set, only upgrade "
        "requests whose URI path matches exactly are delivered to this consumer.",
    )
    message_id_header: str | None = Field(
        "message-id",
        description="(Consumer only) Header key to extract the message ID from the WebSocket "
        'handshake (the first frame of the connection gets it). Defaults to "message-id".',
    )
    routed_queue_capacity: int | None = Field(
        100,
        ge=0,
        description="(Consumer only) Frames queued for the route before readers wait. "
        "Defaults to 100.",
    )
    backlog: int | None = Field(
        4096,
        ge=0,
        le=2**32 - 1,
        description="(Consumer only) TCP listen backlog for the accept socket. Defaults to 4096.",
    )
    execution_mode: ExecutionMode = Field(
        "auto",
        description="(Consumer only) Accepted for compatibility: every route runs through "
        "the normal route pipeline here (`direct_only` is refused).",
    )
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}),
        description="TLS: a consumer listens with `cert_file` and `key_file`; a publisher "
        "uses it for a `wss://` URL.",
    )
    basic_auth: tuple[str, str] | None = secret_field(
        None,
        description="HTTP Basic credentials (username, password): a consumer requires them, a "
        "publisher sends them.",
    )
    max_connections: int | None = Field(
        None,
        ge=0,
        description="(Consumer only) Maximum number of concurrent connections; additional "
        "connections receive 503. Unset = no limit.",
    )
    max_message_bytes: int | None = Field(
        16 * 1024 * 1024,
        ge=1,
        description="(Ours) Largest frame (message) accepted; a larger one closes the "
        "connection with code 1009. Defaults to 16 MiB.",
    )
    request_timeout_ms: int | None = Field(
        30_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Ours, publisher) How long `request` waits for the reply frame, and a "
        "send for the connection. Defaults to 30000ms; 0 = no limit.",
    )

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset(
        {
            "message_id_header",
            "routed_queue_capacity",
            "backlog",
            "max_message_bytes",
            "request_timeout_ms",
        }
    )

    @model_validator(mode="after")
    def _consistent(self) -> WebSocketOptions:
        if self.path is not None and not self.path.startswith("/"):
            raise OptionError("path", f"a path starts with '/': {self.path!r}")
        problem = url_host_problem(self.url, "ws")
        if problem is not None:
            raise OptionError("url", problem)
        return self

    @property
    def request_timeout(self) -> float | None:
        return (self.request_timeout_ms or 0) / 1000 or None
