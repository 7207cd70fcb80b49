"""`outage`: an in-process output that goes away the way a broker does, registered per test.

    {"outage": {"name": "<key>"}}

looks up a `Server` by name. While the server is down, `connect` is refused
(`EndpointUnavailableError`), a send on a live connection loses it (the same error), and a
send on a closed or never opened connection raises `ClosedError("not connected")` — what
the amqp and mqtt outputs do after a failed reconnect, the path that lost messages before
the delivery rule. What a send stored is what the "broker" acknowledged.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.errors import ClosedError, EndpointUnavailableError
from mq_bridge.message import Message


class OutageOptions(Options):
    name: str


OPTIONS = OutageOptions

SERVERS: dict[str, Server] = {}


@dataclass
class Server:
    """The broker an `outage` output talks to: up or down, and what it stored."""

    up: bool = True
    stored: list[Message] = field(default_factory=list)
    connects: int = 0
    refused: int = 0
    #: raised by every connect instead of the refusal (a bad login, a bad config)
    connect_error: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def payloads(self) -> list[bytes]:
        with self.lock:
            return [m.payload for m in self.stored]


class OutageOutput(OutputEndpoint):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.connected = False

    def connect(self) -> None:
        self.server.connects += 1
        if self.server.connect_error is not None:
            raise self.server.connect_error
        if not self.server.up:
            self.server.refused += 1
            raise EndpointUnavailableError("outage: connection refused")
        self.connected = True

    def send(self, messages: Sequence[Message]) -> None:
        if not self.connected:
            raise ClosedError("not connected")
        if not self.server.up:
            self.connected = False
            raise EndpointUnavailableError("outage: connection lost")
        with self.server.lock:
            self.server.stored.extend(messages)

    def describe(self) -> str:
        return "outage"

    def close(self) -> None:
        self.connected = False


def build_output(options: OutageOptions, context: BuildContext) -> OutageOutput:
    return OutageOutput(SERVERS[options.name])


@pytest.fixture
def outage(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Server]]:
    """Registers the `outage` endpoint; the test fills the returned dict of servers."""
    monkeypatch.setitem(ENDPOINT_MODULES, "outage", __name__)
    SERVERS.clear()
    yield SERVERS
    SERVERS.clear()
