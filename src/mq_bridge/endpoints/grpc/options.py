"""Options of the `grpc` endpoint (see `mq_bridge.endpoints.grpc`).

The names, types and meanings are mq-bridge's ``GrpcConfig`` (0.3.2's, and 1.2.0's
additions). 1.2.0's descriptor-driven "dynamic" calls (`descriptor_set_*`, `reflection`,
`service_name`, `method_name`, `request`, call `metadata`, `bearer_token`, `api_key`) are
accepted by the schema, so a peer's config validates, and rejected with a clear error:
this endpoint speaks the ``mqbridge.Bridge`` service only.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from mq_bridge.config.declarations import MAX_MILLISECONDS, OptionError, Options, secret_field
from mq_bridge.endpoints.kit.tls import TlsOptions

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "DEFAULT_TOPIC", "GrpcOptions"]

#: gRPC's (and tonic's) default limit on a received message.
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
#: The topic of a message or subscriber that names none (mq-bridge's).
DEFAULT_TOPIC = "default"

_Millis = Field(None, ge=0, le=MAX_MILLISECONDS)
_DYNAMIC = (
    "descriptor_set_path",
    "descriptor_set_bytes",
    "service_name",
    "method_name",
    "request",
    "bearer_token",
    "api_key",
)


class GrpcOptions(Options):
    """The mq-bridge gRPC service ``mqbridge.Bridge``: a server input or a client output."""

    url: str = Field(
        min_length=1,
        description='The gRPC server URL (e.g. "http://localhost:50051" for a client, '
        '"0.0.0.0:50051" for server mode; https:// or `tls` for TLS).',
    )
    topic: str | None = Field(
        None,
        description="Topic used for both subscribe and publish paths (sent as the "
        '`mq_bridge.topic` metadata; "default" when unset).',
    )
    consumer_id: str | None = Field(
        None,
        description="(Client input) Stable subscription identity used for ack tracking and "
        "redelivery; a fresh id per consumer when unset.",
    )
    timeout_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Compatibility timeout in ms: the fallback for `connect_timeout_ms` and "
        "`request_timeout_ms`. In server mode, how long a Publish waits for the route to "
        "settle the message before answering NACK (unset: no bound).",
    )
    connect_timeout_ms: int | None = Field(
        None, ge=0, le=MAX_MILLISECONDS, description="Maximum time to establish a connection."
    )
    request_timeout_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Maximum time for one RPC (a Publish until its answer). Default 30000.",
    )
    idle_stream_timeout_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Client input) Reconnect a Subscribe stream that stays idle this long.",
    )
    overall_timeout_ms: int | None = Field(
        None, ge=0, le=MAX_MILLISECONDS, description="Accepted for mq-bridge configs; unused."
    )
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}),
        description="TLS configuration (server mode: `cert_file`/`key_file` are the server's "
        "certificate, `ca_file` requires and verifies client certificates).",
    )
    server_mode: bool = Field(
        False,
        description="If true, start an embedded gRPC server that accepts Publish / "
        "PublishBatch RPCs (and serves Subscribe / Acknowledge). If false, be a client.",
    )
    initial_stream_window_size: int | None = Field(
        None, ge=0, le=2**31 - 1, description="HTTP/2 stream-level initial window size in bytes."
    )
    initial_connection_window_size: int | None = Field(
        None,
        ge=0,
        le=2**31 - 1,
        description="HTTP/2 connection-level initial window size in bytes.",
    )
    concurrency_limit_per_connection: int | None = Field(
        None,
        ge=0,
        description="(Server mode) Maximum concurrent RPCs per connection (grpcio applies it "
        "as the server-wide maximum of concurrent streams per connection).",
    )
    http2_keepalive_interval_ms: int | None = Field(
        None, ge=0, le=MAX_MILLISECONDS, description="HTTP/2 keepalive ping interval in ms."
    )
    http2_keepalive_timeout_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Timeout for a keepalive ping acknowledgement in ms.",
    )
    max_decoding_message_size: int | None = Field(
        None,
        ge=1,
        le=2**31 - 1,
        description="Maximum size of a received message in bytes. Default 4 MiB.",
    )
    max_encoding_message_size: int | None = Field(
        None,
        ge=1,
        le=2**31 - 1,
        description="Maximum size of a sent message in bytes. Default unlimited.",
    )
    descriptor_set_path: str | None = Field(None, description="Not supported (dynamic calls).")
    descriptor_set_bytes: list[int] | None = Field(
        None, description="Not supported (dynamic calls)."
    )
    reflection: bool = Field(False, description="Not supported (dynamic calls).")
    service_name: str | None = Field(None, description="Not supported (dynamic calls).")
    method_name: str | None = Field(None, description="Not supported (dynamic calls).")
    request: Any = Field(None, description="Not supported (dynamic calls).")
    server_streaming: bool = Field(False, description="Accepted for mq-bridge configs; unused.")
    metadata: dict[str, str] | None = Field(
        None, description="Static metadata of dynamic calls: not supported."
    )
    binary_metadata: dict[str, list[int]] | None = Field(
        None, description="Static binary metadata of dynamic calls: not supported."
    )
    bearer_token: str | None = secret_field(None, description="Not supported (dynamic calls).")
    api_key: str | None = secret_field(None, description="Not supported (dynamic calls).")
    api_key_name: str | None = Field(None, description="Not supported (dynamic calls).")
    shared: bool | None = Field(
        True,
        description="(Publisher) Share one gRPC channel per connection settings; false forces "
        "a dedicated channel.",
    )

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset({"shared"})

    @model_validator(mode="after")
    def _consistent(self) -> GrpcOptions:
        for name in _DYNAMIC:
            if getattr(self, name) is not None:
                raise OptionError(
                    name,
                    "descriptor-driven gRPC calls are not supported: this endpoint "
                    "speaks the mqbridge.Bridge service only",
                )
        if self.reflection:
            raise OptionError("reflection", "gRPC reflection calls are not supported")
        if self.metadata or self.binary_metadata:
            raise OptionError("metadata", "static call metadata is not supported")
        host, port = split_address(self.url)
        if not host or port is None:
            raise OptionError("url", f"expected host:port or http(s)://host:port, not {self.url!r}")
        if self.server_mode and self.tls.required and not self.tls.cert_file:
            raise OptionError("tls", "a TLS server needs `cert_file` (and `key_file`)")
        return self

    @property
    def target(self) -> str:
        """The ``host:port`` that grpcio dials or binds."""
        host, port = split_address(self.url)
        return f"{host}:{port}"

    @property
    def uses_tls(self) -> bool:
        return self.tls.required or self.url.lower().startswith("https://")

    @property
    def topic_name(self) -> str:
        topic = (self.topic or "").strip()
        return topic or DEFAULT_TOPIC

    @property
    def request_timeout(self) -> float:
        millis = self.request_timeout_ms or self.timeout_ms
        return millis / 1000 if millis else 30.0

    @property
    def connect_timeout(self) -> float:
        millis = self.connect_timeout_ms or self.timeout_ms
        return millis / 1000 if millis else 10.0

    @property
    def max_receive_size(self) -> int:
        return self.max_decoding_message_size or DEFAULT_MAX_MESSAGE_SIZE

    def describe(self) -> str:
        role = "server" if self.server_mode else "client"
        return f"grpc+{role}:{self.target}/{self.topic_name}"


def split_address(url: str) -> tuple[str, int | None]:
    """``("host", port)`` of ``http://host:port/``, ``host:port`` or ``[::1]:port``."""
    rest = url.strip().split("://", 1)[-1].split("/", 1)[0]
    host, _, port_text = rest.rpartition(":")
    try:
        port = int(port_text)
    except ValueError:
        return rest, None
    if not 0 <= port <= 65535:
        return host, None
    return host, port
