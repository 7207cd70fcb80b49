"""Streamed bodies split into items: SSE events, NDJSON / JSON lines (no I/O).

    SSE (text/event-stream)          NDJSON / JSON lines
    -----------------------          -------------------
    event: tick                      {"n": 1}\\n
    id: 7                            {"n": 2}\\n
    data: {"n": 1}
    <blank line ends the event>

An SSE event's item is its ``data`` lines joined by ``\\n`` (with ``event`` and ``id`` as
metadata, ``sse_event`` / ``sse_id``); comments (``:``) and events without data are
skipped. A JSON line's item is the line without its end; blank lines are skipped.
`ItemSplitter.feed` takes chunks as they arrive and returns the items they complete;
`finish` returns the last one when the body ends without a final newline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Literal

from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.errors import ConfigError
from mq_bridge.message import Message

__all__ = ["ItemSplitter", "ResponseStreamer", "StreamFormat", "stream_format"]

StreamFormat = Literal["sse", "ndjson"]

#: A line longer than this (an item without an end) is an error, not unbounded memory.
MAX_LINE = 16 * 1024 * 1024


def stream_format(content_type: str | None) -> StreamFormat | None:
    """The item format of a body with `content_type`, or None when it is not a stream."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind == "text/event-stream":
        return "sse"
    if kind in (
        "application/x-ndjson",
        "application/ndjson",
        "application/jsonl",
        "application/x-jsonlines",
        "application/jsonlines",
        "application/json-seq",
    ):
        return "ndjson"
    return None


class ItemSplitter:
    """Cuts a body of `fmt` into items as its chunks arrive."""

    def __init__(self, fmt: StreamFormat) -> None:
        self.format = fmt
        self._tail = b""
        self._data: list[bytes] = []
        self._fields: dict[str, str] = {}

    def feed(self, chunk: bytes) -> list[tuple[bytes, dict[str, str]]]:
        buffer = self._tail + chunk if self._tail else chunk
        lines = buffer.split(b"\n")
        self._tail = lines.pop()
        if len(self._tail) > MAX_LINE:
            raise ValueError(f"a stream line is longer than {MAX_LINE} bytes")
        items: list[tuple[bytes, dict[str, str]]] = []
        for line in lines:
            item = self._line(line.removesuffix(b"\r"))
            if item is not None:
                items.append(item)
        return items

    def finish(self) -> list[tuple[bytes, dict[str, str]]]:
        items = self.feed(b"\n") if self._tail else []
        if self.format == "sse":
            last = self._line(b"")
            if last is not None:
                items.append(last)
        return items

    def _line(self, line: bytes) -> tuple[bytes, dict[str, str]] | None:
        if self.format == "ndjson":
            return (line, {}) if line.strip() else None
        if not line:
            return self._end_event()
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if name == b"data":
            self._data.append(value)
        elif name in (b"event", b"id"):
            self._fields[f"sse_{name.decode()}"] = value.decode("utf-8", "replace")
        return None

    def _end_event(self) -> tuple[bytes, dict[str, str]] | None:
        data, fields = self._data, self._fields
        self._data, self._fields = [], {}
        if not data:
            return None
        return b"\n".join(data), fields


class ResponseStreamer:
    """`stream_response_to`: the items of a streamed response, sent to another endpoint.

    Each item goes out as a message with the request's ``correlation_id`` (or, without one,
    the request id as 32 hex digits, so a caller can derive it before sending), and
    ``http_stream_id`` (the same value), ``http_stream_index`` (0, 1, ...),
    ``http_stream_format`` (``sse`` / ``ndjson``) and ``http_stream_end`` (``false``). The
    stream ends with an empty item marked ``http_stream_end: true``; a stream that breaks
    after its first item ends with an item marked ``http_stream_error`` (the cause) and is
    not retried (its items already went out). The sink's sends run on a worker thread, never
    on the event loop.
    """

    def __init__(self, sink_config: Mapping[str, Any], context: BuildContext) -> None:
        if context.build_output is None:
            raise ConfigError(
                "stream_response_to needs a runtime that builds endpoints",
                path="http.stream_response_to",
            )
        self._sink: OutputEndpoint = context.build_output(sink_config)
        self._sink.connect()

    @staticmethod
    def streams(response: Any) -> bool:
        """Whether `response` (an aiohttp response) is a stream of items."""
        return stream_format(response.headers.get("Content-Type")) is not None

    async def forward(self, response: Any, request: Message) -> int:
        """Send the items of `response` to the sink; the number of items sent."""
        fmt = stream_format(response.headers.get("Content-Type"))
        assert fmt is not None
        splitter = ItemSplitter(fmt)
        stream_id = request.metadata_view.get("correlation_id") or f"{request.id_int:032x}"
        base = {
            "correlation_id": stream_id,
            "http_stream_id": stream_id,
            "http_stream_format": fmt,
        }
        index = 0

        async def emit(items: list[tuple[bytes, dict[str, str]]], **last: str) -> None:
            nonlocal index
            batch = []
            for payload, fields in items:
                metadata = {**base, **fields, "http_stream_index": str(index)}
                metadata["http_stream_end"] = last.get("http_stream_end", "false")
                metadata.update(last)
                batch.append(Message(payload, metadata))
                index += 1
            if batch:
                await asyncio.to_thread(self._sink.send, batch)

        try:
            async for chunk in response.content.iter_any():
                await emit(splitter.feed(chunk))
            await emit(splitter.finish())
        except Exception as error:
            if index == 0:
                raise
            await emit([(b"", {})], http_stream_end="true", http_stream_error=repr(error))
            return index
        await emit([(b"", {})], http_stream_end="true")
        return index

    def close(self) -> None:
        self._sink.close()
