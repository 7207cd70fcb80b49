"""How ``twainmq consume`` shows a message: text when the payload is text, hex when it is not.

A ``str`` payload is printed as it is. A ``bytes`` payload is printed as text when it is
text: UTF-8, with what is not (an invalid byte, a control character) written as an escape
(``\\n``, ``\\x00``), so that one message stays one line. Payloads that are mostly such
bytes are binary data and are shown as ``<N bytes> 0a1b…`` (the first 32 bytes in hex).

This recognises no format written on top of twainmq: a record that mq_bridge's ``twain``
endpoint wrote (its envelope: ``MQB1``, a binary id and length, JSON metadata, then the
payload) shows as that text, its JSON readable and the binary header escaped
(``MQB1\\x01\\x93…\\x00\\x00\\x00\\x1c{"kind":…}{"order_id":1,…}``); ``mq-bridge consume``
decodes it. The engine never imports the bridge.

``--json`` prints one JSON object per message; its ``message`` is the payload as JSON:

=============================  ==========================================================
payload                        ``message``
=============================  ==========================================================
``str``                        the string
a registered dataclass         ``{"type": "Event", ...its fields}``
``bytes``, a UTF-8 JSON text   ``{"json": <the value>}``
``bytes``, other UTF-8 text    ``{"text": "..."}``
``bytes``, not UTF-8           ``{"bytes": "<hex>", "text": "..."}`` (escaped, as the
                               plain line shows it)
binary data                    ``{"bytes": "<hex>"}``
=============================  ==========================================================
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, is_dataclass
from typing import Any

from twainmq.message import Message

__all__ = ["render"]

#: Payloads with more than this share of escaped bytes are binary data (shown in hex).
_MOST_ESCAPED = 0.25
_HEX_SHOWN = 32
#: What is not text: C0 controls but the tab, DEL, C1 controls (they would break or garble a
#: line) and the bytes that are not UTF-8 (surrogateescape decodes them to U+DC80..U+DCFF).
_NOT_TEXT = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\udc80-\udcff]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def render(message: Message, as_json: bool) -> str:
    """One line for `message`: tab-separated fields, or a JSON object (`as_json`)."""
    body = message.message
    if as_json:
        return json.dumps(
            {
                "partition": message.partition,
                "offset": message.offset,
                "key": message.key,
                "timestamp": message.timestamp_us / 1e6,
                "message": _jsonable(body),
            },
            ensure_ascii=False,
        )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(message.timestamp_us / 1e6))
    return f"{message.partition}:{message.offset}\t{message.key}\t{stamp}Z\t{_text(body)}"


def _jsonable(body: Any) -> Any:
    if isinstance(body, bytes):
        return _jsonable_bytes(body)
    if is_dataclass(body) and not isinstance(body, type):
        return {"type": type(body).__name__, **asdict(body)}
    return body


def _jsonable_bytes(body: bytes) -> dict[str, Any]:
    shown = text_of(body)
    if shown is None:
        return {"bytes": body.hex()}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return {"bytes": body.hex(), "text": shown}
    try:
        return {"json": json.loads(text)}
    except ValueError:
        return {"text": text}


def _text(body: Any) -> str:
    if isinstance(body, str):
        return body
    if isinstance(body, bytes):
        shown = text_of(body)
        if shown is not None:
            return shown
        more = "…" if len(body) > _HEX_SHOWN else ""
        return f"<{len(body)} bytes> {body[:_HEX_SHOWN].hex()}{more}"
    return repr(body)


def text_of(body: bytes) -> str | None:
    """`body` as one line of text (escapes for what is not text), or None for binary data.

    >>> text_of(b'{"order_id": 1}')
    '{"order_id": 1}'
    >>> text_of(b'MQB1\\x00\\x00\\x00\\x02{}{"drink": "caf\\xc3\\xa9", "size": "\\xff"}')
    'MQB1\\\\x00\\\\x00\\\\x00\\\\x02{}{"drink": "café", "size": "\\\\xff"}'
    >>> text_of(bytes(14) + b"09") is None
    True
    """
    text = body.decode("utf-8", errors="surrogateescape")
    if len(_NOT_TEXT.findall(text)) > _MOST_ESCAPED * len(body):
        return None
    return _NOT_TEXT.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code >= 0xDC80:  # a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    if code >= 0x80:  # a C1 control character
        return f"\\u{code:04x}"
    return _NAMED.get(char) or f"\\x{code:02x}"
