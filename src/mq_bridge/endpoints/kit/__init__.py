"""The plumbing every broker endpoint shares, written once.

- `TlsOptions`, `ssl_context`, `tls_required`: the ``tls`` option block and its client
  `ssl.SSLContext` (``tls``);
- `ConnectionRegistry`, `Lease`, `connection_key`, `default_registry`: one connection per
  connection settings, shared and reference-counted (``shared: true``) (``connections``);
- `LoopThread`, `loop_thread`: one asyncio loop thread per process for asyncio-only
  clients, run from sync code (``event_loop``);
- `require_driver`: import an optional client library, or say which extra installs it
  (``drivers``);
- `SOURCE_PREFIX`, `source_metadata_enabled`, `drop_source_keys`, `with_source`: the
  ``mqb.src.*`` source-cursor metadata rules (``source_metadata``);
- `ReplyRegistry`: requests waiting for their replies by ``correlation_id`` (the `response`
  output answers them); the runtime hands the process's one as `BuildContext.replies`;
  `ReplyForwarders`: an input's requests, each reply forwarded to its ``reply_to`` (the
  endpoint supplies only how), forgotten when their batch is settled or the input closes
  (``replies``);
- `replaced_atomically`: a file replaced atomically, its temporary name unique per process
  and thread (``atomic_files``);
- `MESSAGE_ID_HEADER`, `headers_for`, `message_from_wire`, `position_id`: messages to and
  from broker headers, ids included (``wire``);
- `bad_requests.BadRequests`: the malformed requests an aiohttp server answered 400,
  counted and logged one line each (the http and websocket listeners, the console;
  imported from its module, as it looks aiohttp's errors up);
- `wakeup.Wakeup`: an input's interrupt, remembered until a receive consumes it (the one
  semantics of `InputEndpoint.interrupt`), with the waits that honour it (imported from
  its module);
- `listener.attach`, `listener.detach`, `listener.Listener`, `listener.listen_address`,
  `listener.server_ssl_context`: one aiohttp server per listen address, shared by path
  between the http and websocket inputs, its loop driven by the routes reading from it; and
  `handoff.Handoff`, the requests it queues for one input's route and their outcomes back
  (imported from their modules);
- `hosts.host_name_problem`, `hosts.url_host_problem`: a host name the idna codec refuses
  (a label over 63 characters), found when the options are read, not when a route connects.

`event_loop` (asyncio) and `tls` (pydantic) load on first use of their names; no driver is
imported until an endpoint asks for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.kit.atomic_files import replaced_atomically
from mq_bridge.endpoints.kit.connections import (
    ConnectionRegistry,
    Lease,
    connection_key,
    default_registry,
)
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.kit.replies import ReplyForwarders, ReplyRegistry
from mq_bridge.endpoints.kit.source_metadata import (
    SOURCE_PREFIX,
    drop_source_keys,
    source_metadata_enabled,
    with_source,
)
from mq_bridge.endpoints.kit.wire import (
    MESSAGE_ID_HEADER,
    headers_for,
    message_from_wire,
    position_id,
)

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.event_loop import LoopThread, loop_thread
    from mq_bridge.endpoints.kit.tls import TlsOptions, ssl_context, tls_required

__all__ = [
    "MESSAGE_ID_HEADER",
    "SOURCE_PREFIX",
    "ConnectionRegistry",
    "Lease",
    "LoopThread",
    "ReplyForwarders",
    "ReplyRegistry",
    "TlsOptions",
    "connection_key",
    "default_registry",
    "drop_source_keys",
    "headers_for",
    "loop_thread",
    "message_from_wire",
    "position_id",
    "replaced_atomically",
    "require_driver",
    "source_metadata_enabled",
    "ssl_context",
    "tls_required",
    "with_source",
]

_LAZY = {
    "LoopThread": "event_loop",
    "loop_thread": "event_loop",
    "TlsOptions": "tls",
    "ssl_context": "tls",
    "tls_required": "tls",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
