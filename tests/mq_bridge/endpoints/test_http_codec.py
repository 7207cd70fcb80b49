"""The http codec's pure functions: what a request's headers become, what a reply sends."""

from __future__ import annotations

from mq_bridge.endpoints.http import codec
from mq_bridge.endpoints.http.options import is_header_name
from mq_bridge.message import Message

REQUEST_LINE = ("POST", "/orders", "a=1", "HTTP/1.1")


def request(headers: list[tuple[str, str]]) -> Message:
    return codec.message_from_request(b"{}", headers, REQUEST_LINE, "message-id", "c-1")


def test_a_client_cannot_forge_source_metadata_but_lookalike_names_are_kept() -> None:
    message = request(
        [("MQB.SRC.offset", "7"), ("X-Mqb.Src.Note", "kept"), ("Content-Type", "text/plain")]
    )
    assert message.metadata_view == {
        "x-mqb.src.note": "kept",
        "content-type": "text/plain",
        "http_method": "POST",
        "http_path": "/orders",
        "http_query": "a=1",
        "http_version": "HTTP/1.1",
        "correlation_id": "c-1",
    }


def test_a_reply_sends_only_valid_headers_it_added_or_changed() -> None:
    source = request([("Content-Type", "application/json"), ("X-Trace", "t1")])
    reply = source.with_metadata(
        **{"x-trace": "t1", "x-new": "yes", "bad header": "no", "x-split": "a\r\nb"}
    )
    assert codec.reply_headers(reply, source) == {
        "x-new": "yes",
        "content-type": "application/json",
    }


def test_header_names_are_rfc_9110_tokens_whether_or_not_cached() -> None:
    for _ in range(2):  # the second round answers from the cache
        assert is_header_name("x-request-id")
        assert not is_header_name("")
        assert not is_header_name("bad header")
        assert not is_header_name("x:y")
        assert not is_header_name("é")
