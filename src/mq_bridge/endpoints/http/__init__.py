"""http: an HTTP server input and an HTTP client output (aiohttp).

This module is the builders; `options` declares the options, `server` runs the shared
listeners, `input` turns requests into messages and replies into responses, `output`
sends messages as requests, `codec` maps both (no I/O), `streaming` splits SSE / NDJSON
bodies into items.

Features
    - Input: a server listening on `url` (``host:port``); `path` and `method` pick which
      requests this input gets, so several routes share one listener (404 for a path
      nobody serves, 405 with ``Allow`` for a served path and another method).
    - Each request is a message: the body, the request headers (lower-cased) and
      ``http_method`` / ``http_path`` / ``http_query`` / ``http_version`` as metadata, the
      id from the `message_id_header` header (default ``message-id``).
    - Request/reply: a route whose output is `response` answers 200 with the reply's
      payload and the metadata the handler added as headers; a request acknowledged without
      a reply gets 202, one nacked 500, one without an outcome within `request_timeout_ms`
      504. `fire_and_forget` answers 202 as soon as the request is queued.
    - Guards: `concurrency_limit` (503), `basic_auth` (401), `max_body_bytes` (413), a
      header-read timeout against slow clients, TLS (`tls.cert_file` / `key_file`, mutual
      TLS with `ca_file`), gzip responses with `compression_enabled`.
    - `receive_streamable`: each SSE event / NDJSON or JSON line of a request body is its
      own message.
    - Output: `send` returns once every message got a 2xx (else a retriable error);
      `request` returns the response (body, headers, ``http_status``); `batch_concurrency`
      requests at a time; `custom_headers`, `basic_auth`, gzip request bodies; keep-alive
      pooling, one pool per process (`shared`). `stream_response_to` forwards the items of
      a streamed response (SSE / NDJSON) to another endpoint.

URL
    input: the listen address ``host:port`` (``http://host:port`` and ``https://`` too);
    output: the target URL, ``http://host:port/path`` (``https://`` for TLS).

Options (declared in `options.py`, `HttpOptions`; mq-bridge's ``HttpConfig``)
    url, path, method, tls, message_id_header, request_timeout_ms, fire_and_forget,
    receive_streamable, concurrency_limit, basic_auth (a secret), custom_headers (secret),
    compression_enabled, compression_threshold_bytes, compression, max_body_bytes,
    header_read_timeout_ms, batch_concurrency, pool_idle_timeout_ms, tcp_keepalive_ms,
    shared, stream_response_to, pass_through_status; accepted without effect: workers,
    internal_buffer_size, inline_response_fast_path, server_protocol (HTTP/1.x only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.http.options import HttpOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.http.input import HttpInput
    from mq_bridge.endpoints.http.output import HttpOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = HttpOptions


def build_input(options: HttpOptions, context: BuildContext) -> HttpInput:
    """A server listening on `url`, taking the requests for `path` and `method`."""
    from mq_bridge.endpoints.http.input import HttpInput

    return HttpInput(options, context)


def build_output(options: HttpOptions, context: BuildContext) -> HttpOutput:
    """A client sending each message to `url`."""
    from mq_bridge.endpoints.http.output import HttpOutput

    return HttpOutput(options, context)
