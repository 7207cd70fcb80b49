"""HTTP/2 and size settings as grpcio channel/server options, and TLS credentials.

    max_decoding_message_size        grpc.max_receive_message_length (default 4 MiB)
    max_encoding_message_size        grpc.max_send_message_length (default unlimited)
    http2_keepalive_interval_ms      grpc.keepalive_time_ms (+ pings without calls allowed)
    http2_keepalive_timeout_ms       grpc.keepalive_timeout_ms
    initial_stream_window_size       grpc.http2.lookahead_bytes, BDP probing off
    concurrency_limit_per_connection grpc.max_concurrent_streams (server)

grpc core has no setting for the connection-level window: it sizes it itself (BDP
probing); `initial_connection_window_size` is accepted and has no effect.
"""

from __future__ import annotations

from typing import Any

from mq_bridge.endpoints.grpc.options import GrpcOptions
from mq_bridge.errors import ConfigError

__all__ = ["channel_options", "client_credentials", "server_credentials"]


def channel_options(options: GrpcOptions, server: bool) -> list[tuple[str, Any]]:
    """grpcio options for a channel (client) or a server built from `options`."""
    settings: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", options.max_receive_size),
        ("grpc.max_send_message_length", options.max_encoding_message_size or -1),
    ]
    if options.http2_keepalive_interval_ms:
        settings += [
            ("grpc.keepalive_time_ms", options.http2_keepalive_interval_ms),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ]
    if options.http2_keepalive_timeout_ms:
        settings.append(("grpc.keepalive_timeout_ms", options.http2_keepalive_timeout_ms))
    if server:
        # Accept the client keepalive pings mq-bridge's tonic clients may send.
        settings.append(("grpc.http2.min_recv_ping_interval_without_data_ms", 1000))
        # grpcio sets SO_REUSEPORT by default: a second server (another process) on the
        # same port would then share the connections silently instead of failing to bind.
        settings.append(("grpc.so_reuseport", 0))
    if options.initial_stream_window_size:
        settings += [
            ("grpc.http2.lookahead_bytes", options.initial_stream_window_size),
            ("grpc.http2.bdp_probe", 0),
        ]
    if server and options.concurrency_limit_per_connection:
        settings.append(("grpc.max_concurrent_streams", options.concurrency_limit_per_connection))
    return settings


def _read(path: str | None, field: str) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise ConfigError(f"cannot read {path!r}: {error.strerror or error}", path=field) from None


def _check_tls(options: GrpcOptions) -> None:
    if options.tls.cert_password:
        raise ConfigError(
            "grpcio cannot read an encrypted private key: decrypt it (openssl pkey) and drop "
            "cert_password",
            path="tls.cert_password",
        )
    if options.tls.accept_invalid_certs:
        raise ConfigError(
            "gRPC clients do not support accept_invalid_certs (as in mq-bridge): give the "
            "server's CA in tls.ca_file",
            path="tls.accept_invalid_certs",
        )


def client_credentials(options: GrpcOptions) -> Any:
    """Channel credentials for a TLS client (`ca_file`, client `cert_file`/`key_file`)."""
    import grpc

    _check_tls(options)
    tls = options.tls
    certificate = _read(tls.cert_file, "tls.cert_file")
    key = _read(tls.key_file, "tls.key_file") if tls.key_file else certificate
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file, "tls.ca_file"),
        private_key=key if certificate else None,
        certificate_chain=certificate,
    )


def server_credentials(options: GrpcOptions) -> Any:
    """Server credentials: its certificate and key; with `ca_file`, client certificates
    are required and verified against it (mutual TLS)."""
    import grpc

    _check_tls(options)
    tls = options.tls
    certificate = _read(tls.cert_file, "tls.cert_file")
    key = _read(tls.key_file, "tls.key_file") if tls.key_file else certificate
    if certificate is None or key is None:
        raise ConfigError("a TLS server needs `cert_file` (and `key_file`)", path="tls")
    ca = _read(tls.ca_file, "tls.ca_file")
    return grpc.ssl_server_credentials(
        [(key, certificate)], root_certificates=ca, require_client_auth=ca is not None
    )
