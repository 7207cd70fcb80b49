"""Message payloads: ``str`` (UTF-8), ``bytes`` (as is) and registered dataclasses (JSON).

A dataclass payload is stored as ``u8 name length | type name (UTF-8) | JSON object``. The type
name is the class's ``__message_type__`` attribute if it has one, else its ``__name__``. Decoding
looks the name up in the registry at read time, so a class may be registered at any moment
before its messages are read. Nested dataclasses, ``list``/``tuple``/``dict`` and ``Optional``
fields are rebuilt from their type hints. Never pickle: JSON cannot run code on the reader.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from typing import Any

from .encoding import TAG_BYTES, TAG_DATACLASS, TAG_TEXT
from .errors import (
    InvalidMessageError,
    MessageTypeConflictError,
    MessageTypeError,
    UnregisteredMessageTypeError,
)
from .message import UndecodedMessage


def message_type_name(cls: type) -> str:
    """Return the name a dataclass is registered and stored under."""
    return str(getattr(cls, "__message_type__", cls.__name__))


class MessageTypeRegistry:
    """Dataclass types known to one ``Twain``: type name -> class."""

    def __init__(self) -> None:
        self._by_name: dict[str, type] = {}

    def register(self, cls: type) -> None:
        """Register ``cls``; registering the same class twice is harmless."""
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise MessageTypeError(f"{cls!r} is not a dataclass type")
        name = message_type_name(cls)
        try:
            encoded = name.encode("utf-8")
        except UnicodeEncodeError:
            raise MessageTypeError(f"message type name {name!r} is not valid UTF-8") from None
        if len(encoded) > 255:
            raise MessageTypeError(f"message type name {name!r} is longer than 255 bytes")
        known = self._by_name.get(name)
        if known is not None and known is not cls:
            raise MessageTypeConflictError(
                f"message type {name!r} is already registered to {known.__module__}."
                f"{known.__qualname__}"
            )
        self._by_name[name] = cls

    def lookup(self, name: str) -> type:
        """Return the class registered under ``name``."""
        try:
            return self._by_name[name]
        except KeyError:
            raise UnregisteredMessageTypeError(
                f"message type {name!r} is not registered: call register_msg_cls({name}) first"
            ) from None

    def names(self) -> list[str]:
        """Return the registered type names, sorted."""
        return sorted(self._by_name)


def encode_payload(
    message: object, registry: MessageTypeRegistry, declared: frozenset[str]
) -> tuple[int, bytes]:
    """Return ``(tag, payload bytes)`` for a message.

    ``declared`` is the topic's list of dataclass type names; when not empty, other
    dataclass types are refused.
    """
    if isinstance(message, str):
        return TAG_TEXT, encode_text(message)
    if isinstance(message, (bytes, bytearray, memoryview)):
        return TAG_BYTES, bytes(message)
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        return TAG_DATACLASS, _encode_dataclass(message, registry, declared)
    raise MessageTypeError(
        f"message {message!r:.80} is a {type(message).__name__}: "
        "send str, bytes or a registered dataclass instance"
    )


def _encode_dataclass(
    message: Any, registry: MessageTypeRegistry, declared: frozenset[str]
) -> bytes:
    name = message_type_name(type(message))
    if registry.lookup(name) is not type(message):
        raise UnregisteredMessageTypeError(
            f"message type {name!r} is registered to another class than {type(message)!r}"
        )
    if declared and name not in declared:
        raise UnregisteredMessageTypeError(
            f"message type {name!r} is not one of this topic's types {sorted(declared)}"
        )
    name_bytes = name.encode("utf-8")
    try:
        body = json.dumps(
            _dataclass_fields(message), separators=(",", ":"), ensure_ascii=False, default=_nested
        ).encode("utf-8")
    except TypeError as exc:  # a field value JSON cannot hold (bytes, set, ...)
        raise MessageTypeError(f"message {message!r:.80} cannot be stored: {exc}") from None
    except UnicodeEncodeError:
        raise InvalidMessageError(
            f"message {message!r:.80} holds a str with a lone surrogate (not valid UTF-8)"
        ) from None
    except (ValueError, RecursionError) as exc:  # "Circular reference detected", too deep
        raise InvalidMessageError(f"message {message!r:.80} cannot be stored: {exc}") from None
    return bytes([len(name_bytes)]) + name_bytes + body


def encode_text(message: str) -> bytes:
    """A text payload: ``message`` in UTF-8, or InvalidMessageError naming it."""
    try:
        return message.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMessageError(text_error(message)) from None


def text_error(message: str) -> str:
    """Why a text message cannot be stored (it holds a lone surrogate)."""
    return f"text message {message!r:.80} is not valid UTF-8 (it holds a lone surrogate)"


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _dataclass_fields(instance: object) -> dict[str, Any]:
    """One level of a dataclass as a dict; nested ones convert lazily via ``_nested``.

    Cheaper than ``dataclasses.asdict``, which deep-copies every value first.
    """
    cls: type = type(instance)
    return {name: getattr(instance, name) for name in _field_names(cls)}


def _nested(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dataclass_fields(value)
    raise MessageTypeError(
        f"{type(value).__name__} value {value!r:.80} is not JSON-serializable: "
        "use str, int, float, bool, None, list, tuple, dict or a dataclass"
    )


def decode_dataclass(payload: bytes, registry: MessageTypeRegistry) -> object:
    """Rebuild a dataclass instance from its stored payload.

    Returns an UndecodedMessage when the type is not registered or its class refuses the
    fields; raises ValueError when the payload is not a type name and a JSON object.
    """
    name_length = payload[0]
    name = payload[1 : 1 + name_length].decode("utf-8")
    text = payload[1 + name_length :].decode("utf-8")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"dataclass {name} payload is not a JSON object")
    try:
        return from_json_value(registry.lookup(name), data)
    except UnregisteredMessageTypeError as exc:
        return UndecodedMessage(name, text, str(exc))
    except (TypeError, ValueError) as exc:
        return UndecodedMessage(name, text, f"{name}({text}) failed: {exc}")


def from_json_value(hint: Any, value: Any) -> Any:
    """Convert a JSON value back to the type ``hint`` describes (dataclasses, containers)."""
    if value is None:
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = _init_field_hints(hint)
        kwargs = {}
        for name, item in value.items():
            if name in fields:
                field_hint = fields[name]
                kwargs[name] = item if field_hint is None else from_json_value(field_hint, item)
        return hint(**kwargs)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _from_union(args, value)
    if origin in (list, set, frozenset) and args:
        return origin(from_json_value(args[0], item) for item in value)
    if origin is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json_value(args[0], item) for item in value)
        return tuple(from_json_value(a, item) for a, item in zip(args, value))
    if origin is dict and len(args) == 2:
        return {k: from_json_value(args[1], v) for k, v in value.items()}
    return value


# Field types that JSON already gives back as they are: no conversion needed.
_AS_JSON_GIVES = frozenset({int, float, str, bool, type(None), Any, object})


@functools.cache
def _init_field_hints(cls: type) -> dict[str, Any]:
    """Field name -> type hint to convert with, or None when the JSON value is already right.

    Cached per class: resolving type hints (``typing.get_type_hints``) compiles string
    annotations and costs tens of microseconds, far more than decoding a message.
    """
    hints = typing.get_type_hints(cls)
    fields = (f for f in dataclasses.fields(cls) if f.init)
    return {
        f.name: None if hints.get(f.name, Any) in _AS_JSON_GIVES else hints[f.name] for f in fields
    }


def _from_union(args: tuple[Any, ...], value: Any) -> Any:
    for arg in args:
        if isinstance(arg, type) and dataclasses.is_dataclass(arg) and isinstance(value, dict):
            return from_json_value(arg, value)
    non_none = [a for a in args if a is not type(None)]
    return from_json_value(non_none[0], value) if len(non_none) == 1 else value
