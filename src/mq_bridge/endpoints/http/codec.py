"""Messages to and from HTTP requests and responses (no I/O).

Consumer side (a request in, a reply out)::

    request                         message
    -------                         -------
    body                        ->  payload
    headers (names lower-cased) ->  metadata  (``mqb.src.*`` dropped: a client could forge it)
    method, path, query, version->  http_method, http_path, http_query, http_version
    <message_id_header> header  ->  id (UUID / integer text; other text hashed to a stable
                                    id; absent: a new id)
    (ours, unique)              ->  correlation_id (the `response` output answers by it)

    reply                           response
    -----                           --------
    payload                     ->  body (200)
    metadata the handler added  ->  headers (request headers carried over unchanged, the
    or changed                      http_* keys, correlation_id and hop-by-hop or invalid
                                    headers are not sent back)
    content-type                ->  Content-Type (else the request's, else
                                    application/octet-stream)

Publisher side (a message out, a response in)::

    message metadata            ->  request headers (valid names and values only, minus
                                    hop-by-hop headers), plus ``message-id: <32 hex>``
    response body, headers      ->  reply payload, metadata (lower-cased), http_status

A request the route gave up on (a handler failure that is not retried) is answered 500 with
`failure_text` as its plain-text body: the reason, on one line, bounded; never a traceback.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Mapping
from typing import Any

from mq_bridge.endpoints.http.options import is_header_name
from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX
from mq_bridge.errors import NonRetryableError
from mq_bridge.message import Message, new_message_id, normalize_message_id

__all__ = [
    "MAX_FAILURE_TEXT",
    "MESSAGE_ID_HEADER",
    "REQUEST_KEYS",
    "failure_text",
    "gzip_body",
    "message_from_request",
    "message_from_response",
    "reply_headers",
    "request_headers",
]

#: The header our publisher writes the message id to (the consumer's default
#: `message_id_header`, and what mq-bridge's http endpoints use).
MESSAGE_ID_HEADER = "message-id"
#: Metadata keys the consumer adds for the request line.
REQUEST_KEYS = ("http_method", "http_path", "http_query", "http_version")

#: Headers that describe one connection or one body encoding, never copied between them.
_NOT_FORWARDED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
        "expect",
        "authorization",
        "proxy-authorization",
        "correlation_id",
        "http_status",
        *REQUEST_KEYS,
    }
)


def message_from_request(
    body: bytes,
    headers: Iterable[tuple[str, str]],
    request_line: tuple[str, str, str, str],
    id_header: str,
    correlation_id: str | None,
    extra: Mapping[str, str] | None = None,
) -> Message:
    """The message for one request; `request_line` is (method, path, query, version);
    `extra` metadata (a stream item's) goes last."""
    metadata = {name.lower(): value for name, value in headers}
    if SOURCE_PREFIX in "\n".join(metadata):  # a cheap pre-check; the filter is exact
        metadata = {k: v for k, v in metadata.items() if not k.startswith(SOURCE_PREFIX)}
    method, path, query, version = request_line
    metadata["http_method"] = method
    metadata["http_path"] = path
    metadata["http_query"] = query
    metadata["http_version"] = version
    if correlation_id is not None:
        metadata["correlation_id"] = correlation_id
    if extra:
        metadata.update(extra)
    id_text = metadata.get(id_header)
    return Message.trusted(body, metadata, _id_from(id_text))


def _id_from(text: str | None) -> int:
    if not text or not text.strip():
        return new_message_id()
    return normalize_message_id(text)


def reply_headers(reply: Message, request: Message) -> dict[str, str]:
    """The response headers for `reply` to `request` (see the module docstring)."""
    metadata = reply.metadata_view
    request_metadata = request.metadata_view
    headers: dict[str, str] = {}
    if metadata is not request_metadata:
        for key, value in metadata.items():
            if (
                request_metadata.get(key) != value
                and key not in _NOT_FORWARDED
                and _valid(key, value)
            ):
                headers[key] = value
    content_type = metadata.get("content-type") or request_metadata.get("content-type")
    headers["content-type"] = (
        content_type
        if content_type and _valid("content-type", content_type)
        else "application/octet-stream"
    )
    return headers


def request_headers(message: Message, custom: Mapping[str, str]) -> dict[str, str]:
    """The headers our publisher sends for `message`: its metadata, then `custom`."""
    headers = {
        key: value
        for key, value in message.metadata_view.items()
        if key not in _NOT_FORWARDED and not key.startswith(SOURCE_PREFIX) and _valid(key, value)
    }
    headers.update(custom)
    headers[MESSAGE_ID_HEADER] = f"{message.id_int:032x}"
    return headers


def message_from_response(
    body: bytes, status: int, headers: Iterable[tuple[str, str]], request: Message
) -> Message:
    """The reply a publisher's `request` returns: the request's id, the response's headers
    (lower-cased) and ``http_status`` as metadata."""
    metadata: dict[str, Any] = {name.lower(): value for name, value in headers}
    metadata["http_status"] = str(status)
    correlation_id = request.metadata_view.get("correlation_id")
    if correlation_id is not None:
        metadata["correlation_id"] = correlation_id
    return Message.trusted(body, metadata, request.id_int)


#: The longest reason a failed request's answer gives, in characters.
MAX_FAILURE_TEXT = 200


def failure_text(error: BaseException) -> str:
    """Why the route gave up on a request, for its client: a `NonRetryableError`'s message
    (the handler's words), else the error's type and message (``KeyError: 'total'``); on one
    line, cut at `MAX_FAILURE_TEXT` characters.

    >>> failure_text(KeyError("total"))
    "KeyError: 'total'"
    >>> failure_text(NonRetryableError("unknown sku 'plum'"))
    "unknown sku 'plum'"
    """
    name, told = type(error).__name__, " ".join(str(error).split())
    if isinstance(error, NonRetryableError):
        text = told or name
    else:
        text = f"{name}: {told}" if told else name
    return text if len(text) <= MAX_FAILURE_TEXT else text[: MAX_FAILURE_TEXT - 3] + "..."


def gzip_body(body: bytes) -> bytes:
    """`body` gzip-compressed (level 6: most of the gain at a fraction of level 9's cost)."""
    return gzip.compress(body, compresslevel=6, mtime=0)


def _valid(name: str, value: str) -> bool:
    return is_header_name(name) and "\r" not in value and "\n" not in value and "\0" not in value
