"""websocket: a WebSocket server input (aiohttp) and a WebSocket client output (`websockets`).

This module is the builders; `options` declares the options, `input` turns frames into
messages and replies into frames on the same socket (its server is the listener it shares
with http inputs, `mq_bridge.endpoints.kit.listener`), `output` is the client, `codec` the
frame <-> message mapping.

Features
    - Input: a server listening on `url` (``host:port``); `path` picks the upgrade requests
      this input takes (several inputs share one listener by path; another path is refused
      with 404). Each text or binary frame is a message, with ``ws_path``,
      ``ws_peer_addr``, ``ws_message_type`` (``text`` / ``binary``) and the handshake's
      headers as ``ws_header.<name>`` (lower-cased) in its metadata.
    - Request/reply: a route whose output is `response` sends the reply as a frame on the
      socket the request came from (text for a text request, binary for binary).
    - Guards: `max_connections` (503 at the handshake), `basic_auth` (401), frames larger
      than `max_message_bytes` close the connection (1009), TLS (`tls.cert_file`).
    - Output: a client connection to `url`; `send` returns once the frame was written
      (WebSocket has no acknowledgement); `request` sends a frame and returns the next
      frame the server sends back on that connection (ours: the peer's output does not
      answer requests).

URL
    input: the listen address ``host:port``; output: ``ws://host:port/path`` (``wss://``).

Options (declared in `options.py`, `WebSocketOptions`; mq-bridge's ``WebSocketConfig``)
    url (userinfo in it is a secret), path, message_id_header, routed_queue_capacity,
    tls, basic_auth, max_connections, max_message_bytes, request_timeout_ms; accepted
    without effect: backlog (the listener's is 4096), execution_mode (auto / routed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.websocket.options import WebSocketOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.websocket.input import WebSocketInput
    from mq_bridge.endpoints.websocket.output import WebSocketOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = WebSocketOptions


def build_input(options: WebSocketOptions, context: BuildContext) -> WebSocketInput:
    """A server listening on `url`, taking the connections to `path`."""
    from mq_bridge.endpoints.websocket.input import WebSocketInput

    return WebSocketInput(options, context)


def build_output(options: WebSocketOptions, context: BuildContext) -> WebSocketOutput:
    """A client connection to `url`."""
    from mq_bridge.endpoints.websocket.output import WebSocketOutput

    return WebSocketOutput(options, context)
