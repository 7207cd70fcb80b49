"""`Publisher`: send messages to an output endpoint from the caller's own thread.

    publisher = Publisher.from_config({"memory": {"topic": "orders"}})
    publisher.send_json({"order_id": 42}, {"kind": "order.created"})

There is no background thread and no queue of our own: a send returns once the endpoint
took the message (for memory: a lock, an append and a notify), or raises.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mq_bridge.config.documents import Source
from mq_bridge.config.loader import load_endpoint
from mq_bridge.config.redaction import redact
from mq_bridge.endpoints.base import OutputEndpoint
from mq_bridge.errors import ClosedError
from mq_bridge.message import (
    NO_METADATA,
    Message,
    coerce_metadata,
    dump_json,
    new_message_id,
    normalize_message_id,
)
from mq_bridge.runtime.constructors import ClosedOnExit, FromConfig
from mq_bridge.runtime.factory import build_output, new_context

__all__ = ["Publisher"]

DEFAULT_REQUEST_TIMEOUT = 30.0

_trusted_message = Message.trusted  # bound once: send_json is the hot path


class Publisher(FromConfig, ClosedOnExit):
    """Sends to one output endpoint (with its middleware)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        """Prefer the `from_file` / `from_str` / `from_config` constructors."""
        self._config = dict(config)
        output = build_output(self._config, new_context("publisher"))
        output.connect()
        self._output: OutputEndpoint | None = output
        self._send_one = output.send_one
        # An endpoint may offer a cheaper `send_json` of its own (the file endpoint encodes
        # straight to a record); it must check and behave exactly as the code below does.
        self._send_json: Callable[..., None] | None = output.json_sender()

    @classmethod
    def _load(cls, source: Source, name: str | None) -> Publisher:
        return cls(load_endpoint(source, name, "publishers", "output"))

    def send(self, message: Message | bytes, metadata: Mapping[str, str] | None = None) -> None:
        """Send a `Message`, or raw bytes with optional metadata."""
        self._send_one(_as_message(message, metadata))

    def send_json(
        self,
        data: Any,
        metadata: Mapping[str, str] | None = None,
        id: str | int | uuid.UUID | None = None,
    ) -> None:
        """Send `data` serialized as compact JSON."""
        if self._send_json is not None:
            self._send_json(data, metadata, id)
            return
        # `message.json_send_parts`, written out: on this, the in-process hot path, the call
        # cost 1,200 instructions a message (+6 % for send_json to memory, +5 % for the memory
        # route; callgrind, PYTHONHASHSEED=0, 25k minus 5k messages). Same checks, same order;
        # tests/mq_bridge/runtime/test_json_senders.py holds this path to the same errors.
        self._send_one(
            _trusted_message(
                dump_json(data),
                coerce_metadata(metadata) if metadata else NO_METADATA,
                new_message_id() if id is None else normalize_message_id(id),
            )
        )

    def send_batch(self, messages: Iterable[Message | bytes]) -> None:
        """Send several messages in one endpoint call (one round trip where supported)."""
        batch = [_as_message(m, None) for m in messages]
        if batch:
            self._endpoint().send(batch)

    def request(
        self, message: Message | bytes, metadata: Mapping[str, str] | None = None
    ) -> Message:
        """Send one message and wait for its reply (request/reply endpoints)."""
        return self._endpoint().request(_as_message(message, metadata), self._request_timeout())

    def request_json(
        self,
        data: Any,
        metadata: Mapping[str, str] | None = None,
        id: str | int | uuid.UUID | None = None,
    ) -> Message:
        """`request` with `data` serialized as compact JSON."""
        return self.request(Message.from_json(data, metadata, id))

    def close(self) -> None:
        """Flush and release the endpoint. Idempotent; later sends raise `ClosedError`."""
        output, self._output = self._output, None
        self._send_one = _closed
        self._send_json = None
        if output is not None:
            output.close()

    def try_send(self, message: Message | bytes, metadata: Mapping[str, str] | None = None) -> bool:
        """Send as `send` does if the endpoint can take the message without waiting (a
        memory topic with room); else send nothing and return False. `AsyncPublisher` calls
        it on its event loop, and sends from a thread only when it returns False."""
        return self._endpoint().try_send_one(_as_message(message, metadata))

    def _endpoint(self) -> OutputEndpoint:
        if self._output is None:
            raise ClosedError("publisher is closed")
        return self._output

    def _request_timeout(self) -> float:
        for options in self._config.values():
            if isinstance(options, Mapping) and options.get("request_timeout_ms") is not None:
                return float(options["request_timeout_ms"]) / 1000
        return DEFAULT_REQUEST_TIMEOUT

    def __repr__(self) -> str:
        state = "closed" if self._output is None else "open"
        return f"Publisher({state}, config={redact(self._config)!r})"


def _as_message(message: Message | bytes, metadata: Mapping[str, str] | None) -> Message:
    """The message to send, with its id (a new message gets its id as it travels).

    Metadata goes with raw bytes only: a `Message` carries its own, and both peers refuse
    both at once (even ``{}``) rather than guess whether to merge or replace.
    """
    if isinstance(message, Message):
        if metadata is not None:
            raise TypeError("metadata must be None when message is a Message instance")
        message.id_int  # noqa: B018 - assigns the id of a message that has none
        return message
    return Message.trusted(_bytes(message), _metadata(metadata), new_message_id())


def _bytes(payload: object) -> bytes:
    if type(payload) is bytes:
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(
        f"message must be a Message instance or bytes-like payload, not {type(payload).__name__}"
    )


def _metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    return coerce_metadata(metadata) if metadata else NO_METADATA


def _closed(message: Message) -> None:
    raise ClosedError("publisher is closed")
