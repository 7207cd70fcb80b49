"""Messages to table rows and back: pure functions, no I/O.

A row written by us::

    payload     the message's bytes
    message_id  its id as 32 lower-case hex digits (what mq-bridge writes in headers)
    metadata    its metadata (without mqb.src.*) as a compact JSON object; NULL when empty

A row from another writer (the peer keeps only ``payload``) gets a stable id made from the
table and the row's ``id`` (`kit.wire.position_id`), so a redelivered row keeps its id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from mq_bridge.endpoints.kit.source_metadata import drop_source_keys

# position_id's namespace: RowDecoder computes the same ids faster (a test pins them equal)
from mq_bridge.endpoints.kit.wire import POSITION_NAMESPACE
from mq_bridge.message import NO_METADATA, Message, normalize_message_id

__all__ = ["RowDecoder", "RowEncoder"]


class RowEncoder:
    """Parameter tuples for the dialect's INSERT, one per message."""

    def __init__(self, message_id: bool, metadata: bool) -> None:
        self._message_id = message_id
        self._metadata = metadata
        # (metadata, its text), swapped as one object: senders may share this encoder
        self._last: tuple[dict[str, str] | None, str | None] = (None, None)

    def rows(self, messages: Iterable[Message]) -> list[tuple[Any, ...]]:
        if not self._message_id and not self._metadata:
            return [(m.payload,) for m in messages]
        if not self._metadata:
            return [(m.payload, f"{m.id_int:032x}") for m in messages]
        if not self._message_id:
            return [(m.payload, self.metadata_text(m.metadata_view)) for m in messages]
        text = self.metadata_text
        return [(m.payload, f"{m.id_int:032x}", text(m.metadata_view)) for m in messages]

    def metadata_text(self, metadata: dict[str, str]) -> str | None:
        """The JSON text of `metadata` (the last one is remembered: a batch's messages
        usually carry equal metadata)."""
        last, last_text = self._last
        if metadata is last or (last is not None and metadata == last):
            return last_text
        if not metadata:
            text = None
        else:
            kept = drop_source_keys(metadata)
            text = json.dumps(kept, separators=(",", ":"), ensure_ascii=False) if kept else None
        self._last = (metadata, text)
        return text


class RowDecoder:
    """Messages from claimed rows: ``(id, payload[, message_id][, metadata])`` tuples."""

    def __init__(self, table: str, message_id: bool, metadata: bool) -> None:
        self._table = table
        self._prefix = hashlib.sha1(  # what uuid5 hashes before position_id's last part
            POSITION_NAMESPACE.bytes + f"4:sqlx;{len(table)}:{table};".encode(),
            usedforsecurity=False,
        )
        self.has_message_id = message_id
        self.has_metadata = metadata
        self._id_column = 2 if message_id else None
        self._metadata_column = (3 if message_id else 2) if metadata else None
        self._last: tuple[str | None, dict[str, str]] = (None, NO_METADATA)

    def messages(self, rows: Sequence[Sequence[Any]], source: bool) -> list[Message]:
        """`rows` (in id order) as messages; `source` adds mqb.src.sqlx_table/sqlx_id."""
        id_column, metadata_column = self._id_column, self._metadata_column
        trusted = Message.trusted
        messages = []
        for row in rows:
            metadata = (
                NO_METADATA if metadata_column is None else self.metadata(row[metadata_column])
            )
            if source:
                metadata = {
                    **metadata,
                    "mqb.src.sqlx_table": self._table,
                    "mqb.src.sqlx_id": str(row[0]),
                }
            text = None if id_column is None else row[id_column]
            messages.append(trusted(_payload(row[1]), metadata, self.message_id(text, row[0])))
        return messages

    def message_id(self, text: str | None, row_id: int) -> int:
        if text:
            if len(text) == 32:
                try:
                    return int(text, 16)
                except ValueError:
                    pass
            try:
                return normalize_message_id(text)
            except ValueError:
                pass
        return self._position_id(row_id)

    def _position_id(self, row_id: int) -> int:
        """``position_id("sqlx", table, row_id)``, from a SHA-1 state that has already
        hashed everything but the row id (a third of the cost, for rows without an id)."""
        text = str(row_id)
        digest = self._prefix.copy()
        digest.update(f"{len(text)}:{text};".encode())
        value = int.from_bytes(digest.digest()[:16], "big")
        value = (value & ~(0xC000 << 48)) | (0x8000 << 48)  # RFC 4122 variant
        return (value & ~(0xF000 << 64)) | (5 << 76)  # version 5

    def metadata(self, text: str | bytes | None) -> dict[str, str]:
        """The metadata in `text` (a JSON object); equal texts in a row share one dict."""
        if not text:
            return NO_METADATA
        last_text, last_metadata = self._last
        if text == last_text:
            return last_metadata
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            metadata = drop_source_keys(
                {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
            )
        else:
            metadata = NO_METADATA  # not ours: a metadata column of another meaning
        self._last = (text if isinstance(text, str) else None, metadata)
        return metadata


def _payload(value: Any) -> bytes:
    """bytes from a BYTEA/BLOB (bytes, memoryview) or a text column (str)."""
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    if value is None:
        return b""
    return bytes(value)
