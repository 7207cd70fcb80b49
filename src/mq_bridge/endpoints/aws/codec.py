"""Messages to and from SQS and SNS: pure functions, no I/O.

One message on the wire (what mq-bridge 1.2.0 writes and reads, plus the id)::

    body (MessageBody / Message)   the payload as UTF-8 text; with binary_payload_mode,
                                   the payload in base64
    MessageAttributes              one String attribute per metadata entry (mqb.src.*
                                   dropped), and
        aws_binary_encoded         "true" when the body is base64 (consumers decode it
                                   whatever their own binary_payload_mode says, as 1.2.0)
        mq_bridge.message_id       the id, 32 hex digits (kit.wire's convention), when
                                   there is room: SQS carries at most 10 attributes and
                                   metadata goes first
    MessageGroupId                 FIFO: metadata `message_group_id`, else the option
    MessageDeduplicationId         FIFO: metadata `message_deduplication_id`, else the
                                   id (32 hex digits) unless the queue deduplicates by
                                   content

Reading, the id is the ``mq_bridge.message_id`` attribute, else the SQS MessageId (a UUID,
stable across redeliveries: mq-bridge 1.2.0's id). String and Number attributes become
metadata; Binary attributes are skipped (the peer drops them too). The FIFO metadata keys
travel as attributes too, so a message comes back with the metadata it was sent with (and
a route to another FIFO queue keeps its group).

SQS checks attribute names and values for the whole request: one bad message would fail
its nine neighbours, so `Encoder` checks each message first and fails only that one
(`InvalidMessageError`, not retriable).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX, with_source
from mq_bridge.endpoints.kit.wire import MESSAGE_ID_HEADER, message_from_wire, position_id
from mq_bridge.errors import EndpointError, EndpointUnavailableError
from mq_bridge.message import Message

__all__ = [
    "BINARY_ATTRIBUTE",
    "DEDUPLICATION_ID_KEY",
    "GROUP_ID_KEY",
    "MAX_ATTRIBUTES",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ENTRIES",
    "Encoded",
    "Encoder",
    "InvalidMessageError",
    "decode",
    "entry_failure",
    "split_batches",
]

log = logging.getLogger("mq_bridge.endpoints.aws")

BINARY_ATTRIBUTE = "aws_binary_encoded"
GROUP_ID_KEY = "message_group_id"
DEDUPLICATION_ID_KEY = "message_deduplication_id"
#: SQS's limits: attributes per message, entries per batch call, bytes per batch call.
MAX_ATTRIBUTES = 10
MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024

_ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_RESERVED_PREFIXES = ("aws.", "amazon.")
#: Characters SQS refuses in a text body (outside XML's character range).
_INVALID_BODY_CHARACTERS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: Per-entry failure codes that will fail the same way again: not retriable.
_PERMANENT_CODES = frozenset(
    {
        "InvalidParameterValue",
        "InvalidMessageContents",
        "MissingParameter",
        "InvalidAttributeName",
        "InvalidAttributeValue",
        "UnsupportedOperation",
        "InvalidParameter",
        "ValidationError",
        "InvalidBatchEntryId",
    }
)


class InvalidMessageError(EndpointError):
    """A message SQS/SNS cannot carry as it is (not retriable: it would fail again)."""


@dataclass(frozen=True, slots=True)
class Encoded:
    """One message, ready for a batch entry of either service."""

    body: str
    attributes: dict[str, dict[str, str]]
    group_id: str | None
    deduplication_id: str | None
    size: int

    def sqs_entry(self, entry_id: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"Id": entry_id, "MessageBody": self.body}
        return self._with_common(entry)

    def sns_entry(self, entry_id: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"Id": entry_id, "Message": self.body}
        return self._with_common(entry)

    def _with_common(self, entry: dict[str, Any]) -> dict[str, Any]:
        if self.attributes:
            entry["MessageAttributes"] = self.attributes
        if self.group_id is not None:
            entry["MessageGroupId"] = self.group_id
        if self.deduplication_id is not None:
            entry["MessageDeduplicationId"] = self.deduplication_id
        return entry


class Encoder:
    """Turns messages into `Encoded` entries for one destination.

    `fifo`: the destination is a FIFO queue or topic (group and deduplication ids are set);
    `content_deduplication`: it deduplicates by content, so no deduplication id is made up.
    """

    def __init__(
        self,
        binary: bool,
        fifo: bool = False,
        content_deduplication: bool = False,
        group_id: str | None = None,
    ) -> None:
        self.binary = binary
        self.fifo = fifo
        self.content_deduplication = content_deduplication
        self.group_id = group_id

    def encode(self, message: Message) -> Encoded:
        """`message` as an entry; `InvalidMessageError` when SQS/SNS would refuse it."""
        metadata = message.metadata_view
        body = self._body(message.payload)
        attributes: dict[str, dict[str, str]] = {}
        group_id = deduplication_id = None
        if self.fifo:
            group_id, deduplication_id = self._fifo_ids(message, metadata)
        size = len(body) if body.isascii() else 4 * len(body)  # bytes, at most
        for key, value in metadata.items():
            if key.startswith(SOURCE_PREFIX):
                continue
            _check_attribute(key, value)
            attributes[key] = {"DataType": "String", "StringValue": value}
            size += len(key) + len(value) + 6
        if self.binary:
            attributes[BINARY_ATTRIBUTE] = {"DataType": "String", "StringValue": "true"}
        if len(attributes) > MAX_ATTRIBUTES:
            raise InvalidMessageError(
                f"SQS/SNS carry at most {MAX_ATTRIBUTES} message attributes; this message has "
                f"{len(attributes)} (metadata entries"
                + (f" + {BINARY_ATTRIBUTE}" if self.binary else "")
                + ")"
            )
        if len(attributes) < MAX_ATTRIBUTES:  # the id only where it fits: metadata first
            attributes[MESSAGE_ID_HEADER] = {
                "DataType": "String",
                "StringValue": f"{message.id_int:032x}",
            }
        return Encoded(body, attributes, group_id, deduplication_id, size + 80)

    def _body(self, payload: bytes) -> str:
        if not payload:
            raise InvalidMessageError("SQS/SNS cannot carry an empty message body")
        if self.binary:
            return base64.b64encode(payload).decode("ascii")
        try:
            body = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidMessageError(
                "the payload is not UTF-8 text, which SQS/SNS bodies must be; set "
                "`binary_payload_mode: true` to send it in base64"
            ) from None
        bad = _INVALID_BODY_CHARACTERS.search(body)
        if bad is not None:
            raise InvalidMessageError(
                f"the payload holds the character {bad.group()!r} (at {bad.start()}), which "
                "SQS refuses in a body; set `binary_payload_mode: true` to send it in base64"
            )
        return body

    def _fifo_ids(self, message: Message, metadata: Mapping[str, str]) -> tuple[str, str | None]:
        group_id = metadata.get(GROUP_ID_KEY) or self.group_id
        if not group_id:
            raise InvalidMessageError(
                f"a FIFO queue or topic needs a MessageGroupId: set metadata `{GROUP_ID_KEY}` "
                "or the option `message_group_id`"
            )
        deduplication_id = metadata.get(DEDUPLICATION_ID_KEY)
        if deduplication_id is None and not self.content_deduplication:
            deduplication_id = f"{message.id_int:032x}"
        return group_id, deduplication_id


def _check_attribute(key: str, value: str) -> None:
    if (
        _ATTRIBUTE_NAME.fullmatch(key) is None
        or key.lower().startswith(_RESERVED_PREFIXES)
        or ".." in key
        or key.startswith(".")
        or key.endswith(".")
    ):
        raise InvalidMessageError(
            f"metadata key {key!r} is not a valid SQS/SNS attribute name (letters, digits, "
            "_ - and single dots inside; at most 256; not starting with AWS. or Amazon.)"
        )
    if not value:
        raise InvalidMessageError(f"metadata {key!r} is empty, which SQS/SNS attributes refuse")


def split_batches(encoded: list[tuple[int, Encoded]]) -> list[list[tuple[int, Encoded]]]:
    """(index, entry) pairs in batch calls of at most 10 entries and 256 KiB, in order.

    A message bigger than the limit alone goes in a call of its own (SQS then says
    whether it takes it).
    """
    batches: list[list[tuple[int, Encoded]]] = []
    current: list[tuple[int, Encoded]] = []
    size = 0
    for item in encoded:
        if current and (len(current) == MAX_BATCH_ENTRIES or size + item[1].size > MAX_BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(item)
        size += item[1].size
    if current:
        batches.append(current)
    return batches


def entry_failure(failure: Mapping[str, Any], service: str) -> EndpointError:
    """A batch answer's ``Failed`` entry as the bridge's error: retriable unless it is the
    sender's fault in a way that would fail again (a bad parameter)."""
    code = str(failure.get("Code", "")) or "unknown"
    text = f"{service} refused the message: {code}: {failure.get('Message', '')}".rstrip(": ")
    if failure.get("SenderFault") and code in _PERMANENT_CODES:
        return InvalidMessageError(text)
    return EndpointUnavailableError(text)


def decode(raw: Mapping[str, Any], queue_url: str, source_metadata: bool) -> Message:
    """The `Message` in one ReceiveMessage result (see the module docstring)."""
    headers: dict[str, str] = {}
    binary = False
    attributes: Mapping[str, Mapping[str, Any]] = raw.get("MessageAttributes") or {}
    for name, attribute in attributes.items():
        value = attribute.get("StringValue")
        if value is None:  # a Binary attribute: not metadata (mq-bridge drops them too)
            continue
        if name == BINARY_ATTRIBUTE:
            binary = value == "true"
            continue
        headers[name] = value
    body: str = raw.get("Body") or ""
    payload = _decoded_body(body, raw) if binary else body.encode("utf-8")
    sqs_id = str(raw.get("MessageId") or "")
    message = message_from_wire(payload, headers, fallback_id=_sqs_id(queue_url, sqs_id))
    if not source_metadata:
        return message
    fields = {"sqs_queue_url": queue_url, "sqs_message_id": sqs_id}
    metadata = with_source(dict(message.metadata_view), fields, True)
    return Message.trusted(message.payload, metadata, message.id_int)


def _decoded_body(body: str, raw: Mapping[str, Any]) -> bytes:
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        log.warning(
            "SQS message %s is marked %s but its body is not base64: kept as text",
            raw.get("MessageId"),
            BINARY_ATTRIBUTE,
        )
        return body.encode("utf-8")


def _sqs_id(queue_url: str, message_id: str) -> int:
    """SQS's MessageId (a UUID) as the id, as mq-bridge 1.2.0 does; else one made from it."""
    try:
        return uuid.UUID(message_id).int
    except ValueError:
        return position_id("aws", queue_url, message_id)
