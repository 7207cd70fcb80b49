"""The ``mqbridge.Bridge`` service's messages, declared here and built at run time.

mq-bridge publishes ``mqbridge/bridge.proto`` as its stable interoperability API (field
numbers never reused; breaking changes go to ``mqbridge.v2``). This module re-declares it
as a `FileDescriptorProto` (the same package, names and field numbers, so the bytes on the
wire are identical) and lets the protobuf runtime build the message classes from it, in a
private descriptor pool (an application's own ``mqbridge`` protos cannot clash with it)::

    syntax = "proto3";
    package mqbridge;

    service Bridge {
      rpc Publish(BridgeMessage) returns (PublishResponse);
      rpc PublishBatch(stream BridgeMessage) returns (stream PublishResponse);
      rpc Subscribe(SubscribeRequest) returns (stream BridgeMessage);
      rpc Acknowledge(Ack) returns (AckResponse);
    }
    message BridgeMessage { bytes payload = 1; string id = 2; map<string, string> metadata = 3; }
    message PublishResponse {
      reserved 1, 2, 3;
      oneof result { BridgeMessage reply = 10; Ack ack = 11; string error = 12; }
    }
    message Ack {
      enum Status { ACK = 0; NACK = 1; REQUEUE = 2; }
      string id = 1; Status status = 2; string reason = 3; map<string, string> metadata = 4;
    }
    message AckResponse { bool success = 1; string error = 2; }
    message SubscribeRequest { string topic = 1; string consumer_id = 2; }

Why no generated ``_pb2.py``: generated code is tied to the protobuf runtime version that
made it (newer generators refuse older runtimes, and the reverse warns), and producing it
needs grpcio-tools, a build-time dependency; the descriptor is eleven fields. The RPCs are
served and called through grpcio's generic handlers and ``channel.unary_unary(...)`` with
these classes' ``SerializeToString`` / ``FromString``.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["ACK", "NACK", "REQUEUE", "SERVICE", "messages", "method_path"]

SERVICE = "mqbridge.Bridge"
ACK, NACK, REQUEUE = 0, 1, 2

_F = descriptor_pb2.FieldDescriptorProto


def method_path(name: str) -> str:
    """The HTTP/2 path of one of the service's methods, e.g. ``/mqbridge.Bridge/Publish``."""
    return f"/{SERVICE}/{name}"


def _field(message: Any, name: str, number: int, kind: int, **extra: Any) -> None:
    field = message.field.add(name=name, number=number, type=kind, **extra)
    field.label = extra.get("label", _F.LABEL_OPTIONAL)


def _map_entry(message: Any, entry: str, name: str, number: int, scope: str) -> None:
    nested = message.nested_type.add(name=entry)
    nested.options.map_entry = True
    _field(nested, "key", 1, _F.TYPE_STRING)
    _field(nested, "value", 2, _F.TYPE_STRING)
    _field(
        message,
        name,
        number,
        _F.TYPE_MESSAGE,
        type_name=f".mqbridge.{scope}.{entry}",
        label=_F.LABEL_REPEATED,
    )


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="mqbridge/bridge.proto", package="mqbridge", syntax="proto3"
    )
    bridge = file.message_type.add(name="BridgeMessage")
    _field(bridge, "payload", 1, _F.TYPE_BYTES)
    _field(bridge, "id", 2, _F.TYPE_STRING)
    _map_entry(bridge, "MetadataEntry", "metadata", 3, "BridgeMessage")

    response = file.message_type.add(name="PublishResponse")
    response.oneof_decl.add(name="result")
    for low in (1, 2, 3):
        response.reserved_range.add(start=low, end=low + 1)
    _field(response, "reply", 10, _F.TYPE_MESSAGE, type_name=".mqbridge.BridgeMessage")
    _field(response, "ack", 11, _F.TYPE_MESSAGE, type_name=".mqbridge.Ack")
    _field(response, "error", 12, _F.TYPE_STRING)
    for field in response.field:
        field.oneof_index = 0

    ack = file.message_type.add(name="Ack")
    status = ack.enum_type.add(name="Status")
    for name, number in (("ACK", ACK), ("NACK", NACK), ("REQUEUE", REQUEUE)):
        status.value.add(name=name, number=number)
    _field(ack, "id", 1, _F.TYPE_STRING)
    _field(ack, "status", 2, _F.TYPE_ENUM, type_name=".mqbridge.Ack.Status")
    _field(ack, "reason", 3, _F.TYPE_STRING)
    _map_entry(ack, "MetadataEntry", "metadata", 4, "Ack")

    ack_response = file.message_type.add(name="AckResponse")
    _field(ack_response, "success", 1, _F.TYPE_BOOL)
    _field(ack_response, "error", 2, _F.TYPE_STRING)

    subscribe = file.message_type.add(name="SubscribeRequest")
    _field(subscribe, "topic", 1, _F.TYPE_STRING)
    _field(subscribe, "consumer_id", 2, _F.TYPE_STRING)
    return file


@cache
def messages() -> SimpleNamespace:
    """The message classes: ``BridgeMessage``, ``PublishResponse``, ``Ack``,
    ``AckResponse``, ``SubscribeRequest`` (built once, on first use)."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file())
    names = ("BridgeMessage", "PublishResponse", "Ack", "AckResponse", "SubscribeRequest")
    return SimpleNamespace(
        **{
            name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"mqbridge.{name}"))
            for name in names
        }
    )
