"""Streaming over the `http` endpoint: `receive_streamable` (each SSE event / NDJSON line of
a request body is a message) and `stream_response_to` (each item of a streamed response
goes to another endpoint), plus the pure item splitter."""

from __future__ import annotations

import threading
import time
from typing import Any

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.endpoints.http.streaming import ItemSplitter, stream_format
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_http import call, http_config


def split(fmt: Any, chunks: list[bytes]) -> list[tuple[bytes, dict[str, str]]]:
    splitter = ItemSplitter(fmt)
    items = [item for chunk in chunks for item in splitter.feed(chunk)]
    return items + splitter.finish()


def test_ndjson_lines_split_across_chunks() -> None:
    assert split("ndjson", [b'{"a":1}\n{"b"', b':2}\r\n\n{"c":3}']) == [
        (b'{"a":1}', {}),
        (b'{"b":2}', {}),
        (b'{"c":3}', {}),
    ]


def test_sse_events_join_data_lines_and_keep_event_and_id() -> None:
    body = [b": comment\nevent: tick\nid: 7\ndata: one\nda", b"ta: two\n\ndata: three\n"]
    assert split("sse", body) == [
        (b"one\ntwo", {"sse_event": "tick", "sse_id": "7"}),
        (b"three", {}),
    ]


def test_stream_formats_by_content_type() -> None:
    assert stream_format("text/event-stream; charset=utf-8") == "sse"
    assert stream_format("application/x-ndjson") == "ndjson"
    assert stream_format("application/json") is None


def poll_all(consumer: Consumer, count: int) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(max=100, timeout_ms=200)
    return got


def test_receive_streamable_makes_a_message_of_each_line() -> None:
    port = free_port()
    topic = f"stream-in-{port}"
    route = {
        "input": http_config(port, receive_streamable=True),
        "output": {"memory": {"topic": topic}},
    }
    with Route.from_config(route), Consumer.from_config({"memory": {"topic": topic}}) as out:
        status, headers, _ = call(
            port,
            body=b'{"n":1}\n{"n":2}\n{"n":3}\n',
            headers={"Content-Type": "application/x-ndjson", "X-Batch": "b1"},
        )
        got = poll_all(out, 3)
    assert status == 202 and headers["x-stream-items"] == "3"
    assert [m.payload for m in got] == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
    assert [m.metadata["http_stream_index"] for m in got] == ["0", "1", "2"]
    assert all(m.metadata["x-batch"] == "b1" for m in got)
    assert len({m.id for m in got}) == 3


def test_stream_response_to_forwards_each_item_with_its_stream_metadata() -> None:
    port = free_port()
    topic = f"stream-out-{port}"
    events = b"data: first\n\ndata: second\n\n"

    def handle(message: Message) -> Message:
        return message.with_payload(events).with_metadata({"content-type": "text/event-stream"})

    server = {"input": http_config(port, path="/sse"), "output": {"response": {}}}
    target = {
        "http": {
            "url": f"http://127.0.0.1:{port}/sse",
            "stream_response_to": {"memory": {"topic": topic}},
        }
    }
    request = Message(b"subscribe")
    with (
        Route.from_config(server).with_handler(handle),
        Publisher.from_config(target) as publisher,
        Consumer.from_config({"memory": {"topic": topic}}) as out,
    ):
        sender = threading.Thread(target=publisher.send, args=(request,))
        sender.start()
        sender.join(20)
        got = poll_all(out, 3)
    stream_id = f"{request.id_int:032x}"
    assert [m.payload for m in got] == [b"first", b"second", b""]
    assert [m.metadata["http_stream_end"] for m in got] == ["false", "false", "true"]
    assert all(m.metadata["correlation_id"] == stream_id for m in got)
    assert all(m.metadata["http_stream_format"] == "sse" for m in got)
    assert [m.metadata["http_stream_index"] for m in got] == ["0", "1", "2"]
