"""Where ours deliberately differs from mq-bridge-py 0.3.2, scenario by scenario.

Each entry is ``(scenario, observation key): (reason, check)``; `docs/compat.md` explains
every one (the test checks it names each key). `check(ours, peer)` says what must still
hold where we differ (e.g. "ours has every name the peer has, but the endpoints still to
come"); `None` means "documented difference, nothing more to check". An entry whose
observations agree again fails the test, so this list never outlives what it describes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[[Any, Any], bool] | None

#: Definitions the peer's schema keeps apart and ours inlines where they are used (the named
#: enums and the TLS block).
INLINED_OR_ABSENT = {
    "FaultMode", "FileFormat", "HttpServerProtocol", "MongoDbFormat", "MqttProtocol",
    "NatsDeliverPolicy", "TlsConfig", "WebSocketExecutionMode", "ZeroMqSocketType",
}  # fmt: skip


def _all_but_inlined(ours: list[str], peer: list[str]) -> bool:
    return set(peer) - set(ours) <= INLINED_OR_ABSENT


def _superset(ours: list[str], peer: list[str]) -> bool:
    return set(peer) <= set(ours)


DIVERGENCES: dict[tuple[str, str], tuple[str, Check]] = {
    ("message_construction", "given int"): ("ours also takes an int id", None),
    ("message_construction", "given text"): ("non-UUID text ids hash to a stable UUID", None),
    ("message_readers", "equal twins"): ("messages compare by value", None),
    ("message_readers", "repr"): ("no Rust `Some(...)` in the repr", None),
    ("publisher_sends", "id of a sent message afterwards"): ("a sent message keeps its id", None),
    ("publisher_requests", "static request payload"): ("static answers its body verbatim", None),
    ("consumer_polling", "poll max 4 count"): ("the peer returns max/2 (a defect)", None),
    ("consumer_polling", "poll_batch"): ("the peer returns what is buffered (a defect)", None),
    ("consumer_polling", "after nack, the batch comes again"): ("the peer loses it", None),
    ("consumer_status_and_close", "details"): ("ours describes the channel", None),
    ("consumer_status_and_close", "status keys"): ("`error` is always present", _superset),
    ("errors_and_signatures", "MemoryDrainer.drain"): ("a larger default batch", None),
    ("errors_and_signatures", "Route.join"): ("join takes an optional timeout", _superset),
    ("file_consumer_exhausts", "exhausted"): ("the peer never sets it (a defect)", None),
    ("route_correlation", "new Message with its own id"): ("a handler's own id is kept", None),
    ("route_correlation", "new Message"): ("no correlation_id added by routes", None),
    ("route_correlation", "pass-through"): ("no correlation_id added by routes", None),
    ("route_correlation", "bytes result"): ("no correlation_id added by routes", None),
    ("route_correlation", "json result"): ("no correlation_id added by routes", None),
    ("route_correlation", "with_json"): ("no correlation_id added by routes", None),
    ("route_correlation", "kind handler"): ("no correlation_id added by routes", None),
    ("route_correlation", "input correlation_id"): ("a new Message keeps a new id", None),
    ("route_correlation", "result correlation_id"): ("the request's id wins", None),
    ("route_handlers", "with_handler results"): ("no correlation_id added by routes", None),
    ("route_handlers", "add_handler results"): ("no correlation_id added by routes", None),
    ("route_from_a_one_route_document", "without a name"): ("the one route is taken", None),
    ("config_module", "typed dict names"): ("enums and TLS inlined", _all_but_inlined),
    ("schema_shape", "$defs present"): ("enums and TLS inlined", _all_but_inlined),
    ("schema_shape", "top-level keys"): ("the root accepts more document shapes", None),
    ("schema_shape", "root"): ("the root accepts more document shapes", None),
    ("schema_shape", "FileConfig properties"): ("more file options", _superset),
    ("schema_shape", "MemoryConfig properties"): ("send_timeout_ms", _superset),
    ("schema_shape", "Route properties"): ("the route option on_error", _superset),
}
