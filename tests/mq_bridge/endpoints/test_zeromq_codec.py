"""The `zeromq` codec's batch paths against their one-at-a-time references (no sockets).

`encode_envelopes` and `decode_many` take shortcuts for the common batch (equal metadata,
UTF-8 payloads, the cached metadata frame); each must give what the general path gives,
including for the batches that fall back to it.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from mq_bridge import Message
from mq_bridge.endpoints.zeromq.codec import (
    MetadataCache,
    decode,
    decode_envelopes,
    decode_many,
    encode_envelopes,
    encode_framed,
)
from mq_bridge.endpoints.zeromq.envelopes import _encode_each

KEYS = st.sampled_from(["k", "kind", "mqb.src.zeromq_topic", "é"])
METADATA = st.dictionaries(KEYS, st.text(max_size=5), max_size=3)
PAYLOADS = st.one_of(
    st.binary(max_size=12),  # often not UTF-8: written as a list of bytes
    st.text(max_size=12).map(str.encode),
    st.just(b'{"a":"x,\\"y\\""}'),
)


@st.composite
def batches(draw: Any) -> list[Message]:
    """Messages that share one metadata dict, equal dicts, or differ; some without ids."""
    shared = draw(METADATA)
    mode = draw(st.sampled_from(["same", "equal", "mixed"]))
    messages = []
    size = draw(st.sampled_from([1, 3, 8, 32, 40]))  # both sides of `_BATCH_PATH_FROM`
    for payload in draw(st.lists(PAYLOADS, min_size=size, max_size=size)):
        metadata = {"same": shared, "equal": dict(shared), "mixed": draw(METADATA)}[mode]
        message = Message(payload, metadata)
        if draw(st.booleans()):
            message.id_int  # noqa: B018 - this one has travelled: it has an id
        messages.append(message)
    return messages


@settings(max_examples=300, deadline=None)
@given(batches())
def test_encode_envelopes_writes_what_the_general_path_writes(messages: list[Message]) -> None:
    frame = encode_envelopes(messages)
    assert frame == _encode_each(messages)
    decoded = decode_envelopes(frame)
    assert decoded.problem is None
    assert [(m.payload, m.metadata, m.id) for m in decoded.messages] == [
        (m.payload, {k: v for k, v in m.metadata.items() if not k.startswith("mqb.src.")}, m.id)
        for m in messages
    ]


def test_encode_envelopes_is_orjson_of_the_envelope_dicts() -> None:
    messages = [Message(b'{"n":1}', {"kind": "k"}, id=1), Message(b"x", {"kind": "k"}, id=2)]
    assert orjson.loads(encode_envelopes(messages)) == [
        {"message_id": "00000000-0000-0000-0000-000000000001", "payload": '{"n":1}',
         "metadata": {"kind": "k"}},
        {"message_id": "00000000-0000-0000-0000-000000000002", "payload": "x",
         "metadata": {"kind": "k"}},
    ]  # fmt: skip
    bare = encode_envelopes([Message(b"x", id=3)])
    assert bare == b'[{"message_id":"00000000-0000-0000-0000-000000000003","payload":"x"}]'
    assert encode_envelopes([]) == b"[]"
    one = b'{"message_id":"00000000-0000-0000-0000-000000000004","payload":"y"}'
    batch = [Message(b"y", id=4)] * 40  # long enough for the batch path
    assert encode_envelopes(batch) == b"[" + b",".join([one] * 40) + b"]"


FRAMES = st.one_of(
    st.lists(st.sampled_from([b'{"k":"v"}', b'{"k":"w"}', b"{}", b"not json", b'{"n":[1]}']),
             min_size=1, max_size=1).map(lambda meta: [meta[0], b"payload"]),
    st.just([b"topic", b'{"k":"v"}', b"after a topic"]),
    st.just([b"one frame"]),
    st.just([b'[{"message_id":"00000000-0000-0000-0000-000000000009","payload":"e"}]']),
    st.just([]),
)  # fmt: skip


def view(messages: list[Message]) -> list[tuple[bytes, dict[str, str]]]:
    return [(m.payload, m.metadata) for m in messages]


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAMES, max_size=10), st.sampled_from(["raw", "raw_framed", "json"]))
def test_decode_many_gives_what_decode_of_each_gives(received: list[list[bytes]], fmt: str) -> None:
    expected, problems, cache = [], [], MetadataCache()
    for frames in received:
        decoded = decode(frames, fmt, cache)
        expected += decoded.messages
        problems += [decoded.problem] if decoded.problem is not None else []
    got, got_problems = decode_many(received, fmt, MetadataCache())
    assert view(got) == view(expected)
    assert got_problems == problems
    new_ids = [m.id_int for m in got if m.id != "00000000-0000-0000-0000-000000000009"]
    assert new_ids == sorted(new_ids) and len(set(new_ids)) == len(new_ids)


def test_decode_many_shares_the_cached_metadata_across_a_run() -> None:
    messages = [Message(b"a", {"k": "v"}), Message(b"b", {"k": "v"}), Message(b"c", {"k": "w"})]
    got, problems = decode_many(encode_framed(messages), "raw_framed", MetadataCache())
    assert problems == [] and view(got) == view(messages)
    assert got[0].metadata_view is got[1].metadata_view
