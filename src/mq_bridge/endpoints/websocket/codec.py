"""Messages to and from WebSocket frames (no I/O).

    frame (server side)                 message
    -------------------                 -------
    text or binary data             ->  payload (text as UTF-8 bytes)
    text / binary                   ->  ws_message_type: "text" | "binary"
    the upgrade request's path      ->  ws_path
    the client's address            ->  ws_peer_addr ("host:port")
    handshake headers               ->  ws_header.<name lower-cased>
    <message_id_header> header      ->  id of the connection's first frame (later frames:
                                        new ids)
    (ours, unique)                  ->  correlation_id (the `response` output answers by it)

A reply goes back as a text frame when the request was text and the reply is UTF-8, else
as a binary frame. The client output sends UTF-8 payloads as text frames and others as
binary, unless ``ws_message_type`` says which.
"""

from __future__ import annotations

from collections.abc import Iterable

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX
from mq_bridge.message import Message, new_message_id

__all__ = ["connection_metadata", "frame_data", "message_from_frame", "reply_from_frame"]


def connection_metadata(
    path: str, peer: object, headers: Iterable[tuple[str, str]]
) -> dict[str, str]:
    """The metadata every frame of one connection shares."""
    metadata = {
        f"ws_header.{name.lower()}": value
        for name, value in headers
        if not name.lower().startswith(SOURCE_PREFIX)
    }
    metadata["ws_path"] = path
    metadata["ws_peer_addr"] = _address(peer)
    return metadata


def message_from_frame(
    data: str | bytes,
    shared: dict[str, str],
    correlation_id: str | None,
    id_value: int | None,
) -> Message:
    if isinstance(data, str):
        payload, kind = data.encode("utf-8"), "text"
    else:
        payload, kind = bytes(data), "binary"
    metadata = dict(shared)
    metadata["ws_message_type"] = kind
    if correlation_id is not None:
        metadata["correlation_id"] = correlation_id
    return Message.trusted(payload, metadata, new_message_id() if id_value is None else id_value)


def frame_data(message: Message, prefer_text: bool = True) -> str | bytes:
    """What to send for `message`: a str (text frame) or bytes (binary frame)."""
    kind = message.metadata_view.get("ws_message_type")
    payload = message.payload
    if kind == "binary" or (kind is None and not prefer_text):
        return payload
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return payload


def reply_from_frame(data: str | bytes, request: Message) -> Message:
    """The reply a client's `request` returns: the frame, the request's id."""
    kind = "text" if isinstance(data, str) else "binary"
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    metadata = {"ws_message_type": kind}
    correlation_id = request.metadata_view.get("correlation_id")
    if correlation_id is not None:
        metadata["correlation_id"] = correlation_id
    return Message.trusted(payload, metadata, request.id_int)


def _address(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer)
