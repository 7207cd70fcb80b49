"""Options of the `http` endpoint (see `mq_bridge.endpoints.http`).

The names, types, defaults and meanings are mq-bridge's ``HttpConfig`` (0.3.2, plus 1.2.0's
`max_body_bytes`, `header_read_timeout_ms`, `pass_through_status` and `compression`).
Where the peer's schema allows ``null`` for an option with a documented default, ``null``
means that default here too.
"""

from __future__ import annotations

import functools
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from mq_bridge.config.declarations import (
    MAX_MILLISECONDS,
    EndpointRef,
    OptionError,
    Options,
    secret_field,
)
from mq_bridge.endpoints.kit.hosts import url_host_problem
from mq_bridge.endpoints.kit.tls import TlsOptions

__all__ = ["HttpOptions", "is_header_name"]

ServerProtocol = Literal["auto", "http1_only", "http2_only"]
Compression = Literal["none", "gzip", "lz4", "zstd"]

#: The consumer's default header-read (and keep-alive idle) timeout when none is set: a
#: client must send a whole request head within it (see docs/endpoints/http.md).
DEFAULT_HEADER_READ_TIMEOUT_MS = 30_000
#: 1.2.0's default body limit.
DEFAULT_MAX_BODY_BYTES = 256 * 1024 * 1024


class HttpOptions(Options):
    """General HTTP connection configuration (mq-bridge's ``HttpConfig``)."""

    url: str = Field(
        min_length=1,
        description='For consumers, the listen address (e.g., "0.0.0.0:8080"). For '
        "publishers, the target URL.",
    )
    path: str | None = Field(
        None,
        description="(Consumer only) Optional request path filter. If set, only requests "
        "whose URI path matches exactly are delivered to this consumer.",
    )
    method: str | None = Field(
        None,
        description="(Optional) HTTP method. For publishers: the method to use (defaults to "
        "POST). For consumers: restrict to this method (others return 405).",
    )
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}),
        description="TLS configuration. A consumer listens with `cert_file` and `key_file` "
        "(and requires client certificates signed by `ca_file` when set); a publisher uses "
        "it for an https:// URL.",
    )
    workers: int | None = Field(
        None,
        ge=0,
        description="(Consumer only) Number of worker threads to use. Accepted for "
        "compatibility: the server runs on one asyncio loop.",
    )
    message_id_header: str | None = Field(
        "message-id",
        description="(Consumer only) Header key to extract the message ID from. Defaults to "
        '"message-id".',
    )
    request_timeout_ms: int | None = Field(
        30_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Timeout for HTTP requests in milliseconds. For consumers, it's the "
        "request-reply timeout (body read included; 504 after it). For publishers, it's the "
        "timeout for each individual request. Defaults to 30000ms; 0 = no limit.",
    )
    internal_buffer_size: int | None = Field(
        100,
        ge=0,
        description="(Consumer only) Internal buffer size for the channel. Defaults to 100.",
    )
    fire_and_forget: bool = Field(
        False,
        description="(Consumer only) If true, respond immediately with 202 Accepted without "
        "waiting for downstream processing. Defaults to false.",
    )
    receive_streamable: bool = Field(
        False,
        description="(Consumer only) If true, read request bodies as a stream and emit each "
        "received stream item (SSE event, NDJSON / JSON line) as a separate message.",
    )
    inline_response_fast_path: bool | None = Field(
        True,
        description="(Consumer only) Accepted for compatibility; every route takes the "
        "normal route path here.",
    )
    server_protocol: ServerProtocol = Field(
        "auto",
        description="(Consumer only) Restrict which HTTP protocol versions a server listener "
        "accepts. This server speaks HTTP/1.x: `auto` and `http1_only` mean HTTP/1.x; "
        "`http2_only` is refused.",
    )
    stream_response_to: EndpointRef | None = Field(
        None,
        description="(Publisher only) Optional endpoint that receives streamed HTTP response "
        "items as correlated messages (`correlation_id`, `http_stream_id`, "
        "`http_stream_index`, `http_stream_format`, `http_stream_end` metadata).",
    )
    batch_concurrency: int | None = Field(
        20,
        ge=0,
        description="(Publisher only) The number of concurrent HTTP requests to send in a "
        "batch. Defaults to 20.",
    )
    tcp_keepalive_ms: int | None = Field(
        60_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Publisher only) TCP keepalive timeout for the underlying connection "
        "pool in milliseconds. Defaults to 60000ms.",
    )
    pool_idle_timeout_ms: int | None = Field(
        90_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Publisher only) Timeout for idle connections in the connection pool in "
        "milliseconds. Defaults to 90000ms.",
    )
    compression_enabled: bool | None = Field(
        False,
        description="Enable gzip compression for request/response bodies exceeding the "
        "threshold (a consumer compresses responses for clients that accept gzip). "
        "Defaults to false.",
    )
    compression_threshold_bytes: int | None = Field(
        1024,
        ge=0,
        description="Minimum message size in bytes to compress. Defaults to 1024 bytes.",
    )
    compression: Compression = Field(
        "none",
        description="(Publisher only) Codec for the request body (`none`, `gzip`); overrides "
        "`compression_enabled`. `lz4` and `zstd` are refused here.",
    )
    concurrency_limit: int | None = Field(
        100,
        ge=0,
        description="(Consumer only) Maximum number of concurrent requests to handle; more "
        "get 503. Defaults to 100; 0 = no limit.",
    )
    basic_auth: tuple[str, str] | None = secret_field(
        None,
        description="HTTP Basic Authentication credentials (username, password). For "
        "consumers: validates incoming requests. For publishers: adds Authorization header.",
    )
    custom_headers: dict[str, str] | None = secret_field(
        None,
        description='Custom headers as key-value pairs (e.g., {"X-API-Key": "token123"}). '
        "Added to outgoing HTTP headers for both consumers (responses) and publishers.",
    )
    shared: bool | None = Field(
        True,
        description="(Publisher only) Share one HTTP client per connection (default: true); "
        "false forces a dedicated client.",
    )
    max_body_bytes: int | None = Field(
        DEFAULT_MAX_BODY_BYTES,
        ge=0,
        description="(Consumer only) Largest request body in bytes, also after decompression; "
        "a larger one gets 413. Defaults to 256 MiB.",
    )
    header_read_timeout_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Consumer only) Close a connection whose request head takes longer than "
        "this, or that stays idle between requests for longer. Unset: 30000 ms; 0 = no limit.",
    )
    pass_through_status: bool = Field(
        False,
        description="(Publisher) Treat every HTTP response status as response data instead of "
        "classifying non-2xx statuses as publisher errors.",
    )

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset(
        {
            "request_timeout_ms",
            "internal_buffer_size",
            "batch_concurrency",
            "tcp_keepalive_ms",
            "pool_idle_timeout_ms",
            "compression_threshold_bytes",
            "concurrency_limit",
            "message_id_header",
            "max_body_bytes",
            "inline_response_fast_path",
            "shared",
            "compression_enabled",
        }
    )

    @model_validator(mode="after")
    def _consistent(self) -> HttpOptions:
        if self.method is not None and not self.method.strip().isalpha():
            raise OptionError("method", f"not an HTTP method: {self.method!r}")
        if self.method is not None and len(self.method.strip()) > MAX_METHOD_CHARS:
            # a server refuses the request line (400) and the sends are retried forever
            raise OptionError("method", f"longer than {MAX_METHOD_CHARS} letters")
        problem = url_host_problem(self.url, "http")
        if problem is not None:
            raise OptionError("url", problem)
        if self.path is not None and not self.path.startswith("/"):
            raise OptionError("path", f"a path starts with '/': {self.path!r}")
        if self.compression in ("lz4", "zstd"):
            raise OptionError(
                "compression", f"{self.compression} is not supported here: use gzip or none"
            )
        for name, value in (self.custom_headers or {}).items():
            if not is_header_name(name) or "\r" in value or "\n" in value:
                raise OptionError("custom_headers", f"not a valid HTTP header: {name!r}")
        return self

    @property
    def upper_method(self) -> str | None:
        return None if self.method is None else self.method.strip().upper()

    @property
    def request_timeout(self) -> float | None:
        """Seconds; None for no limit."""
        return (self.request_timeout_ms or 0) / 1000 or None

    @property
    def header_read_timeout(self) -> float:
        """Seconds (aiohttp's keep-alive timeout); 0 for no limit."""
        if self.header_read_timeout_ms is None:
            return DEFAULT_HEADER_READ_TIMEOUT_MS / 1000
        return self.header_read_timeout_ms / 1000

    @property
    def gzip_requests(self) -> bool:
        """Whether the publisher compresses request bodies (`compression` wins)."""
        if self.compression != "none":
            return self.compression == "gzip"
        return bool(self.compression_enabled)


#: The longest `method` (the longest registered HTTP method, UPDATEREDIRECTREF, has 17).
MAX_METHOD_CHARS = 32

_TOKEN_CHARS = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


@functools.lru_cache(maxsize=1024)
def is_header_name(name: str) -> bool:
    """Whether `name` is a valid HTTP header name (an RFC 9110 token).

    Cached (bounded): every reply checks its headers' names, and they are nearly always
    the same few."""
    return bool(name) and _TOKEN_CHARS.issuperset(name)
