"""Small real in-process endpoints the middleware tests wrap.

`ListInput` hands out a list of messages and records acks and nacks; `ListOutput` keeps what
it was sent and fails the messages a test asks it to, the way a broker or a handler would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.errors import SendError
from mq_bridge.message import Message

FailurePlan = Callable[[Message, int], BaseException | None]


class ListInput(InputEndpoint):
    """Hands out `messages` in order; a nacked batch is handed out again before the rest."""

    def __init__(self, messages: Sequence[Message], any_order: bool = False) -> None:
        self.pending = list(messages)
        self.acked: list[Message] = []
        self.nacked: list[Message] = []
        self.any_order = any_order
        self._interrupted = threading.Event()

    @property
    def acks_in_any_order(self) -> bool:  # type: ignore[override]
        return self.any_order

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        if not self.pending:
            self._interrupted.wait(timeout if timeout is not None else 0.05)
            self._interrupted.clear()
            return Batch([])
        taken, self.pending = self.pending[:max_messages], self.pending[max_messages:]
        return Batch(taken, token=list(taken))

    def ack(self, batch: Batch) -> None:
        self.acked.extend(batch.token)

    def nack(self, batch: Batch) -> None:
        self.nacked.extend(batch.token)
        self.pending[:0] = batch.token

    def interrupt(self) -> None:
        self._interrupted.set()

    def describe(self) -> str:
        return "list-input"


class ListOutput(OutputEndpoint):
    """Keeps what was sent; `fail(message, attempt)` decides a message's failure per attempt."""

    def __init__(self, fail: FailurePlan | None = None, whole_batch: bool = False) -> None:
        self.sent: list[Message] = []
        self.attempts: dict[str, int] = {}
        self.calls = 0
        self.closed = False
        self._fail = fail
        self._whole_batch = whole_batch

    def send(self, messages: Sequence[Message]) -> None:
        self.calls += 1
        failures: dict[int, BaseException] = {}
        for index, message in enumerate(messages):
            key = message.id_int
            attempt = self.attempts[key] = self.attempts.get(key, 0) + 1
            error = self._fail(message, attempt) if self._fail else None
            if error is not None:
                failures[index] = error
            elif not self._whole_batch:
                self.sent.append(message)
        if failures and self._whole_batch:
            raise next(iter(failures.values()))
        if self._whole_batch:
            self.sent.extend(messages)
        if failures:
            raise SendError(failures)

    def close(self) -> None:
        self.closed = True

    def describe(self) -> str:
        return "list-output"


def numbered(count: int) -> list[Message]:
    """`count` small JSON messages whose payload is their number (each with its id, as a
    message that came from an input has)."""
    messages = [Message.from_json({"n": n}) for n in range(count)]
    for message in messages:
        message.assigned_id()
    return messages


def context_with(outputs: dict[str, OutputEndpoint], **options: object) -> BuildContext:
    """A build context whose `build_output` looks endpoints up by their `list` name."""

    def build_output(config: object) -> OutputEndpoint:
        return outputs[config["list"]]  # type: ignore[index]

    return BuildContext(route_name="orders", build_output=build_output, **options)  # type: ignore[arg-type]
