"""Messages <-> ZeroMQ frames: pure functions, no sockets.

A ZeroMQ message is a list of frames. What the frames hold depends on `format`::

    json        [topic]? [ JSON array of envelopes ]           one ZeroMQ message per batch
    raw         [topic]? [ payload ]                           one per message
    raw_framed  [topic]? [ JSON metadata object ] [ payload ]  one per message

    envelope  = {"message_id": "<uuid>", "payload": "<UTF-8 text>" | [byte, ...],
                 "metadata": {"key": "value", ...}}          (metadata left out when empty)

`json` is mq-bridge-py 0.3.2's wire form (its publishers write the payload as a list of
byte values; mq-bridge 1.2.0 writes text when the payload is UTF-8; both read either, and
so do we). The ``topic`` frame is sent only by a PUB socket with a `topic`: a SUB socket
filters on the first frame's prefix. REQ/REP replies are always a `json` frame, whatever
`format` says (as mq-bridge does).

Reading is lenient, as the peer's is: the *last* frame is the envelope (or the payload),
so a leading topic frame or a plain ZeroMQ sender's frames work too. A frame that is not
an envelope (not JSON, or JSON of another shape) is one message whose payload is the
frame; a frame that looks like an envelope but is not a valid one (a bad id, a payload
that is not bytes) is also delivered as its raw bytes, and `decode` reports why
(`Decoded.problem`) so the input can log it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX, drop_source_keys
from mq_bridge.endpoints.zeromq.envelopes import encode_envelopes
from mq_bridge.message import (
    NO_METADATA,
    Message,
    fields_of,
    messages_from_envelopes,
    messages_with_new_ids,
    new_message_id,
)

__all__ = [
    "Decoded",
    "MetadataCache",
    "decode",
    "decode_envelopes",
    "decode_many",
    "encode_envelopes",
    "encode_framed",
    "encode_message",
]


def encode_message(message: Message, fmt: str) -> list[bytes]:
    """The frames of one message in the `raw` or `raw_framed` format (no topic frame)."""
    if fmt == "raw":
        return [message.payload]
    metadata = drop_source_keys(message.metadata_view)
    return [orjson.dumps(metadata), message.payload]


def encode_framed(messages: Sequence[Message]) -> list[list[bytes]]:
    """`raw_framed` frames of each message; equal consecutive metadata is encoded once."""
    out: list[list[bytes]] = []
    last: dict[str, str] | None = None
    frame = b"{}"
    for message in messages:
        metadata, payload, _ = fields_of(message)
        if metadata is not last and metadata != last:
            frame = orjson.dumps(drop_source_keys(metadata))
        last = metadata
        out.append([frame, payload])
    return out


@dataclass(slots=True)
class Decoded:
    """The messages one ZeroMQ message carried, and why it was read as raw bytes, if so."""

    messages: list[Message]
    problem: str | None = None


class MetadataCache:
    """The metadata of the last `raw_framed` metadata frame: consecutive messages with the
    same frame share one dict (messages never change their metadata)."""

    __slots__ = ("frame", "metadata")

    def __init__(self) -> None:
        self.frame: bytes | None = None
        self.metadata: dict[str, str] = NO_METADATA


def decode(frames: Sequence[bytes], fmt: str, cache: MetadataCache | None = None) -> Decoded:
    """The messages in `frames`, one ZeroMQ message written in format `fmt`."""
    if not frames:
        return Decoded([])
    last = bytes(frames[-1])
    if fmt == "raw":
        return Decoded([Message.trusted(last, NO_METADATA, new_message_id())])
    if fmt == "raw_framed" and len(frames) >= 2:
        metadata_frame = bytes(frames[-2])
        if cache is not None and metadata_frame == cache.frame:
            return Decoded([Message.trusted(last, cache.metadata, new_message_id())])
        decoded = _decode_framed(metadata_frame, last)
        if cache is not None and decoded.problem is None:
            cache.frame, cache.metadata = metadata_frame, decoded.messages[0].metadata_view
        return decoded
    return decode_envelopes(last)


def decode_many(
    received: Sequence[Sequence[bytes]], fmt: str, cache: MetadataCache
) -> tuple[list[Message], list[str]]:
    """The messages of several ZeroMQ messages, as `decode` of each would give them, and
    the problems it would report.

    The hot path of `raw` and `raw_framed` reading, where each ZeroMQ message is one
    message: consecutive messages whose metadata frame is the cached one are built
    together (`messages_with_new_ids`), without a `decode` call each.
    """
    if fmt == "raw":
        return messages_with_new_ids(
            [bytes(frames[-1]) for frames in received if frames], NO_METADATA
        ), []
    messages: list[Message] = []
    problems: list[str] = []
    run: list[bytes] = []  # payloads whose metadata frame is `cache.frame`
    for frames in received:
        if fmt == "raw_framed" and len(frames) >= 2 and frames[-2] == cache.frame:
            run.append(bytes(frames[-1]))
            continue
        if run:  # before `decode`, which may change the cache
            messages += messages_with_new_ids(run, cache.metadata)
            run = []
        decoded = decode(frames, fmt, cache)
        messages += decoded.messages
        if decoded.problem is not None:
            problems.append(decoded.problem)
    if run:
        messages += messages_with_new_ids(run, cache.metadata)
    return messages, problems


def decode_envelopes(frame: bytes) -> Decoded:
    """The messages of a `json` frame; a frame that is not an envelope is a raw message."""
    if frame[:1] not in (b"[", b"{"):
        return Decoded([_raw(frame)])
    try:
        value = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return Decoded([_raw(frame)])
    items = value if isinstance(value, list) else [value]
    fast = _common_envelopes(items)
    if fast is not None:
        return Decoded(fast)
    if not all(isinstance(item, dict) and "payload" in item for item in items):
        return Decoded([_raw(frame)])  # JSON, but not envelopes: a plain JSON message
    try:
        return Decoded([_from_envelope(item) for item in items])
    except (TypeError, ValueError) as error:
        return Decoded([_raw(frame)], f"not a valid mq-bridge envelope ({error})")


def _common_envelopes(items: list[Any]) -> list[Message] | None:
    """The common case in one pass (text payloads, UUID ids, string metadata without
    ``mqb.src.*``), or None for the general path."""
    try:
        return messages_from_envelopes(items, SOURCE_PREFIX)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


def _decode_framed(metadata_frame: bytes, payload: bytes) -> Decoded:
    try:
        metadata = _metadata_of(orjson.loads(metadata_frame))
    except (orjson.JSONDecodeError, TypeError, ValueError) as error:
        problem = f"the metadata frame is not a JSON object of strings ({error})"
        return Decoded([_raw(payload)], problem)
    return Decoded([Message.trusted(payload, metadata, new_message_id())])


def _raw(frame: bytes) -> Message:
    return Message.trusted(frame, NO_METADATA, new_message_id())


def _from_envelope(envelope: dict[str, Any]) -> Message:
    payload = envelope["payload"]
    if isinstance(payload, str):
        body = payload.encode("utf-8")
    elif isinstance(payload, list):
        body = bytes(payload)  # ValueError for a value outside 0..255, TypeError for a non-int
    else:
        raise TypeError(f"`payload` must be text or a list of bytes, not {type(payload).__name__}")
    metadata = _metadata_of(envelope.get("metadata"))
    return Message.trusted(body, metadata, _id_of(envelope.get("message_id")))


def _metadata_of(value: Any) -> dict[str, str]:
    if not value:
        return NO_METADATA
    if not isinstance(value, dict):
        raise TypeError("`metadata` must be an object")
    metadata: dict[str, str] = {}
    for key, item in value.items():
        if key.startswith(SOURCE_PREFIX):
            continue  # a peer could forge the source cursor
        if isinstance(item, str):
            metadata[key] = item
        elif isinstance(item, (int, float, bool)):
            metadata[key] = orjson.dumps(item).decode()
        else:
            raise TypeError(f"metadata value of {key!r} must be a string")
    return metadata or NO_METADATA


def _id_of(value: Any) -> int:
    """A `message_id` as mq-bridge writes or reads it: a UUID, a decimal or ``0x`` text, an
    integer; missing or null means a new id."""
    if value is None:
        return new_message_id()
    if isinstance(value, bool):
        raise TypeError("`message_id` must be a UUID or an integer")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            return uuid.UUID(text).int
        except ValueError:
            pass
        number = int(text, 16) if text[:2].lower() == "0x" else int(text, 10)
    else:
        raise TypeError("`message_id` must be a UUID or an integer")
    if not 0 <= number < 1 << 128:
        raise ValueError(f"`message_id` {number} does not fit in 128 bits")
    return number
