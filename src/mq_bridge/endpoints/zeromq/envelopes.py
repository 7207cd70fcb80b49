"""The `json` format's frame: a batch of messages as a JSON array of envelopes.

    envelope = {"message_id": "<uuid>", "payload": "<UTF-8 text>" | [byte, ...],
                "metadata": {"key": "value", ...}}          (metadata left out when empty)

(See `mq_bridge.endpoints.zeromq.codec` for the formats and for reading.)
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any

import orjson

from mq_bridge.endpoints.kit.source_metadata import drop_source_keys
from mq_bridge.endpoints.kit.wire import json_uuid, json_uuids
from mq_bridge.message import NO_METADATA, Message, fields_of

__all__ = ["encode_envelopes"]


def encode_envelopes(messages: Sequence[Message]) -> bytes:
    """One frame holding `messages` as a JSON array of envelopes (``mqb.src.*`` dropped).

    The hot path of every `json` send. A batch of 32 messages or more whose payloads are
    UTF-8 and whose metadata are equal (the common case) is written by C-level builtins, a
    call each for all ids, payloads and envelopes. Its envelopes are formatted as bytes:
    no envelope dicts for the garbage collector to count (in a busy process its full
    collections cost more than the encoding). The bytes are what ``orjson.dumps`` makes
    of the envelope dicts that `_encode_each` builds for any other batch.
    """
    if len(messages) < _BATCH_PATH_FROM:
        return _encode_each(messages)
    metadata, payloads, ids = zip(*map(fields_of, messages))
    first = metadata[0]
    if metadata.count(first) != len(metadata):  # `==`, after a cheap identity check
        return _encode_each(messages)
    try:
        texts = list(map(bytes.decode, payloads))
    except UnicodeDecodeError:
        return _encode_each(messages)
    if None in ids:  # not travelled yet: `id_int` gives them theirs
        ids = tuple(message.id_int for message in messages)
    # Canonical UUID texts hold no comma: one dumps for all, split into '"<uuid>"' items.
    id_items = orjson.dumps(json_uuids(ids))[1:-1].split(b",")
    text_items = map(orjson.dumps, texts)  # each formatted at once: few alive at a time
    if not first:  # no metadata: the key is left out
        envelopes = map(_BARE_ENVELOPE.__mod__, zip(id_items, text_items))
    else:
        clean = orjson.dumps(drop_source_keys(first))
        envelopes = map(_ENVELOPE.__mod__, zip(id_items, text_items, repeat(clean)))
    return b"[%b]" % b",".join(envelopes)


#: The batch path's fixed cost (a dozen C calls and their objects) pays off from ~32
#: messages on; a single `send` costs 4x more than with `_encode_each`.
_BATCH_PATH_FROM = 32
_ENVELOPE = b'{"message_id":%b,"payload":%b,"metadata":%b}'
_BARE_ENVELOPE = b'{"message_id":%b,"payload":%b}'


def _encode_each(messages: Sequence[Message]) -> bytes:
    """`encode_envelopes` for any batch: an envelope dict per message, one ``dumps``."""
    envelopes: list[dict[str, Any]] = []
    append = envelopes.append
    last_metadata: dict[str, str] | None = None
    clean: dict[str, str] = NO_METADATA
    for message in messages:
        metadata, payload, id_value = fields_of(message)
        message_id = json_uuid(message.id_int if id_value is None else id_value)
        try:
            text: str | list[int] = payload.decode()
        except UnicodeDecodeError:
            text = list(payload)
        if not metadata:
            append({"message_id": message_id, "payload": text})
            continue
        if metadata is not last_metadata:
            last_metadata, clean = metadata, drop_source_keys(metadata)
        append({"message_id": message_id, "payload": text, "metadata": clean})
    return orjson.dumps(envelopes)
