"""`Consumer`: pull batches from an input endpoint on your own schedule.

    with Consumer.from_config({"memory": {"topic": "orders"}}) as consumer:
        for message in consumer.poll(max=500, timeout_ms=1000):
            handle(message.json())
        consumer.commit()                # ack only after handling

Delivery is at-least-once: `poll` hands messages out without acknowledging them; `commit`
(or `ack(token)`) acknowledges; `nack` and `close` without a commit make them available
again where the transport can (memory always can).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from mq_bridge.config.documents import Source
from mq_bridge.config.loader import load_endpoint
from mq_bridge.config.redaction import redact
from mq_bridge.endpoints.base import Batch, InputEndpoint
from mq_bridge.errors import ClosedError
from mq_bridge.message import Message
from mq_bridge.runtime.constructors import ClosedOnExit, FromConfig
from mq_bridge.runtime.factory import build_input, new_context

__all__ = ["Consumer"]

DEFAULT_MAX = 256  # as mq-bridge-py


class Consumer(FromConfig, ClosedOnExit):
    """A pull consumer over one input endpoint (with its middleware)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        """Prefer the `from_file` / `from_str` / `from_config` constructors."""
        self._config = dict(config)
        source = build_input(self._config, new_context("consumer"))
        source.connect()
        self._input: InputEndpoint | None = source
        self._outstanding: OrderedDict[int, Batch] = OrderedDict()
        self._next_token = 0

    @classmethod
    def _load(cls, source: Source, name: str | None) -> Consumer:
        return cls(load_endpoint(source, name, "consumers", "input"))

    def poll(self, max: int = DEFAULT_MAX, timeout_ms: int | None = None) -> list[Message]:
        """Up to `max` messages, unacknowledged until `commit()`; [] after `timeout_ms`."""
        return self.poll_batch(max, timeout_ms)[0]

    def poll_batch(
        self, max: int = DEFAULT_MAX, timeout_ms: int | None = None
    ) -> tuple[list[Message], int | None]:
        """Like `poll`, plus the batch's token for `ack` / `nack`; ([], None) on timeout."""
        source = self._open_input()
        if max < 1:
            raise ValueError(f"max must be at least 1, got {max}")
        batch = source.receive(max, None if timeout_ms is None else timeout_ms / 1000)
        if not batch.messages:
            return [], None
        token = self._next_token
        self._next_token = token + 1
        self._outstanding[token] = batch
        return batch.messages, token

    def ack(self, token: int) -> None:
        """Acknowledge one batch. On cumulative-ack inputs the oldest batch must come first."""
        if type(token) is not int:
            raise TypeError(f"a batch token is an int from poll_batch, not {type(token).__name__}")
        source = self._open_input()
        batch = self._outstanding.get(token)
        if batch is None:
            raise ValueError(
                f"unknown batch token {token!r} (already acked/nacked, or never polled)"
            )
        oldest = next(iter(self._outstanding))
        if token != oldest and not source.acks_in_any_order:
            raise ValueError(
                f"batch {token} acked before older batch {oldest}: {source.describe()} "
                "acknowledges cumulatively, so ack the oldest batch first (or use commit())"
            )
        source.ack(batch)
        del self._outstanding[token]

    def nack(self, token: int | None = None) -> None:
        """Release one batch (or, with no token, every outstanding batch) for redelivery."""
        source = self._open_input()
        if token is None:
            tokens = list(self._outstanding)
        elif token in self._outstanding:
            tokens = [token]
        else:
            raise ValueError(
                f"unknown batch token {token!r} (already acked/nacked, or never polled)"
            )
        for key in reversed(tokens):  # requeued at the front: newest first keeps the order
            source.nack(self._outstanding.pop(key))

    def commit(self) -> None:
        """Acknowledge every batch handed out since the last commit, oldest first.

        After `close()` there is nothing left to commit: a no-op, as in mq-bridge-py (the
        batches still outstanding were released for redelivery by `close`).
        """
        if self._input is None:
            return
        source = self._open_input()
        while self._outstanding:
            token, batch = next(iter(self._outstanding.items()))
            source.ack(batch)
            del self._outstanding[token]

    def status(self) -> dict[str, Any]:
        """A snapshot: healthy, target, pending, capacity, error, details."""
        return self._open_input().status().as_dict()

    @property
    def exhausted(self) -> bool:
        """True once a bounded source (e.g. a file) has handed out everything."""
        return self._input is not None and self._input.exhausted

    def close(self) -> None:
        """Nack what was not committed, release the endpoint. Idempotent."""
        source, self._input = self._input, None
        if source is None:
            return
        try:
            for token in reversed(list(self._outstanding)):
                source.nack(self._outstanding.pop(token))
        finally:
            source.close()

    def _open_input(self) -> InputEndpoint:
        if self._input is None:
            raise ClosedError("consumer is closed")
        return self._input

    def __repr__(self) -> str:
        state = "closed" if self._input is None else "open"
        return f"Consumer({state}, config={redact(self._config)!r})"
