"""A real in-process endpoint the runtime tests drive: `scripted`, registered per test.

    {"scripted": {"name": "<key>"}}

looks up a `Script` by name; the script holds the messages to hand out, records acks,
nacks and connects, and can fail a receive or hang a connect, the way a broker does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint
from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.message import Message


class ScriptedOptions(Options):
    name: str


OPTIONS = ScriptedOptions

SCRIPTS: dict[str, Script] = {}


@dataclass
class Script:
    """What a scripted input hands out and what happened to it."""

    messages: list[Message]
    bounded: bool = True
    any_order: bool = False
    receive_errors: list[BaseException] = field(default_factory=list)
    ack_errors: list[BaseException] = field(default_factory=list)
    connect_hangs: threading.Event | None = None
    acked: list[Message] = field(default_factory=list)
    nacked: list[Message] = field(default_factory=list)
    connects: int = 0
    closes: int = 0


class ScriptedInput(InputEndpoint):
    def __init__(self, script: Script) -> None:
        self.script = script
        self._wake = threading.Event()

    @property
    def acks_in_any_order(self) -> bool:  # type: ignore[override]
        return self.script.any_order

    def connect(self) -> None:
        self.script.connects += 1
        if self.script.connect_hangs is not None:
            self.script.connect_hangs.wait(30)

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        script = self.script
        if script.receive_errors:
            raise script.receive_errors.pop(0)
        if not script.messages:
            self._wake.wait(0.02 if timeout is None else min(timeout, 0.02))
            return Batch([])
        taken = script.messages[:max_messages]
        del script.messages[:max_messages]
        return Batch(taken, taken)

    def ack(self, batch: Batch) -> None:
        if self.script.ack_errors:
            raise self.script.ack_errors.pop(0)
        self.script.acked.extend(batch.token)

    def nack(self, batch: Batch) -> None:
        self.script.nacked.extend(batch.token)
        self.script.messages[:0] = batch.token

    @property
    def exhausted(self) -> bool:
        return self.script.bounded and not self.script.messages

    def interrupt(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self.script.closes += 1


def build_input(options: ScriptedOptions, context: BuildContext) -> ScriptedInput:
    return ScriptedInput(SCRIPTS[options.name])


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Script]]:
    """Registers the `scripted` endpoint; the test fills the returned dict of scripts."""
    monkeypatch.setitem(ENDPOINT_MODULES, "scripted", __name__)
    SCRIPTS.clear()
    yield SCRIPTS
    SCRIPTS.clear()
