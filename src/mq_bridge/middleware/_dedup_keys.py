"""What makes two messages duplicates: the `key` option of deduplication.

    message_id (default)       the message id
    metadata:<name>            a metadata value          (also written ${metadata:<name>})
    ${payload:<a.b.c>}         a field of the JSON payload, dotted for nested objects

A message without the value (no such metadata key, a payload that is not JSON or lacks the
field) falls back to its id, so it is never dropped for want of a key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from mq_bridge.message import Message

KeyOf = Callable[[Message], str]

_TEMPLATE = re.compile(r"^\$\{(metadata|payload):([^}]+)\}$")


def id_key(message: Message) -> str:
    """The message id as 32 hex digits: the same value as `.id`, several times cheaper."""
    return f"{message.id_int:032x}"


def key_function(key: str | None) -> KeyOf:
    """The function that gives a message's deduplication key, for the `key` option.

    A form it does not know is a ValueError (the option's declaration checks with it).
    """
    if key in (None, "", "message_id", "id", "${id}", "${message_id}"):
        return id_key
    source, name = _parse(key)
    if source == "metadata":
        return lambda message: _tagged("m", message.get(name)) or id_key(message)
    path = name.split(".")
    return lambda message: _tagged("p", _payload_field(message, path)) or id_key(message)


def _parse(key: str) -> tuple[str, str]:
    if key.startswith("metadata:") and len(key) > len("metadata:"):
        return "metadata", key[len("metadata:") :]
    match = _TEMPLATE.match(key)
    if match is None:
        raise ValueError(
            f"unknown key {key!r}; use message_id, metadata:<name> or ${{payload:<field>}}"
        )
    return match.group(1), match.group(2)


def _tagged(kind: str, value: str | None) -> str | None:
    """Keys from values get a prefix so they never collide with a 32-hex-digit id key."""
    return None if value is None else f"{kind}:{value}"


def _payload_field(message: Message, path: list[str]) -> str | None:
    try:
        value: Any = message.json()
    except ValueError:
        return None
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return json.dumps(value, sort_keys=True)  # as JSON, so "7" and 7 stay different keys
