"""deduplication: let each message id through once within a time window, across restarts.

Input and output. Ids seen are kept in an SQLite file (stdlib `sqlite3`, WAL mode), so a
restarted process still drops what it handled before; `ttl_seconds` bounds how long an id
is remembered.

- On an **input**, a message whose id was handled already is dropped from the batch (and
  acknowledged with it). An id is remembered when its batch is **acked**, not when it is
  received: a nacked or crashed batch is delivered again instead of being dropped as a
  duplicate of itself.
- On an **output**, a message whose id was sent already is not sent again; an id is
  remembered once its send succeeded.

Options::

    deduplication:
      ttl_seconds: 3600                    # how long an id is remembered (required)
      store: sqlite:///var/lib/app/dedup.db   # or a plain path; memory:// keeps ids in memory
      key: message_id                      # or metadata:<name>, or ${payload:<field>}

The store may be shared by several routes of one process (one connection per path).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pydantic import Field, field_validator

from mq_bridge.config.declarations import MAX_SECONDS, Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.errors import SendError
from mq_bridge.message import Message
from mq_bridge.middleware._dedup_keys import KeyOf, key_function
from mq_bridge.middleware._ordered_acks import OrderedAcks
from mq_bridge.middleware._seen_ids import SeenIds, open_seen_ids, store_path
from mq_bridge.middleware.base import InputMiddleware, OutputMiddleware

__all__ = ["OPTIONS", "DeduplicationOptions", "wrap_input", "wrap_output"]


class DeduplicationOptions(Options):
    """Drops messages whose id (or key) was handled within ttl_seconds; the ids are kept in
    an SQLite file and survive restarts."""

    ttl_seconds: int = Field(
        ge=1, le=MAX_SECONDS, description="How long an id is remembered, in seconds."
    )
    store: str | None = Field(
        None,
        description="Where ids are kept: sqlite:///path, a file path, or memory:// "
        "(not kept across restarts).",
    )
    key: str | None = Field(
        None,
        description="What identifies a duplicate: message_id, metadata:<name> or "
        "${payload:<field>} (dotted for nested fields).",
    )

    @field_validator("store")
    @classmethod
    def _supported_store(cls, store: str | None) -> str | None:
        store_path(store)  # raises ValueError for a store it cannot open
        return store

    @field_validator("key")
    @classmethod
    def _known_key_form(cls, key: str | None) -> str | None:
        key_function(key)  # raises ValueError for a form it does not know
        return key


OPTIONS = DeduplicationOptions


class DeduplicationOutput(OutputMiddleware):
    """Sends only the messages whose key was not sent before; remembers the ones it sent."""

    def __init__(self, inner: OutputEndpoint, seen: SeenIds, key_of: KeyOf) -> None:
        super().__init__(inner)
        self.seen = seen
        self.key_of = key_of

    def send(self, messages: Sequence[Message]) -> None:
        keys = [self.key_of(m) for m in messages]
        fresh = _first_unseen(keys, self.seen.known(keys))
        if not fresh:
            return
        try:
            self.inner.send([messages[i] for i in fresh])
        except SendError as error:
            sent = [fresh[p] for p in range(len(fresh)) if p not in error.failures]
            self.seen.add(keys[i] for i in sent)
            raise SendError({fresh[p]: e for p, e in error.failures.items()}) from error
        self.seen.add(keys[i] for i in fresh)

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.seen.close()


class DeduplicationInput(InputMiddleware):
    """Hands out only unseen messages; remembers a batch's keys when it is acked."""

    def __init__(self, inner: InputEndpoint, seen: SeenIds, key_of: KeyOf) -> None:
        super().__init__(inner)
        self.seen = seen
        self.key_of = key_of
        self.acks = OrderedAcks(inner)

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        ends = None if timeout is None else time.monotonic() + timeout
        while True:
            batch = self.inner.receive(max_messages, timeout)
            if not batch:
                return batch
            keys = [self.key_of(m) for m in batch.messages]
            fresh = _first_unseen(keys, self.seen.known(keys))
            if fresh:
                messages = [batch.messages[i] for i in fresh]
                return Batch(messages, (self.acks.handed_out(batch), [keys[i] for i in fresh]))
            # Only duplicates: done with them already. Keep reading rather than hand out
            # an empty batch nobody would acknowledge.
            self.acks.done(self.acks.handed_out(batch))
            if ends is not None:
                timeout = max(0.0, ends - time.monotonic())

    def ack(self, batch: Batch) -> None:
        entry, keys = batch.token
        self.seen.add(keys)
        self.acks.done(entry)

    def nack(self, batch: Batch) -> None:
        entry, _keys = batch.token
        self.acks.failed(entry)

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.seen.close()


def _first_unseen(keys: list[str], known: set[str]) -> list[int]:
    """Indexes of the keys not known, keeping only the first of equal keys within a batch."""
    fresh: list[int] = []
    taken = set(known)
    for index, key in enumerate(keys):
        if key not in taken:
            taken.add(key)
            fresh.append(index)
    return fresh


def _build(options: DeduplicationOptions) -> tuple[SeenIds, KeyOf]:
    return open_seen_ids(options.store, options.ttl_seconds), key_function(options.key)


def wrap_output(
    inner: OutputEndpoint, options: DeduplicationOptions, context: BuildContext
) -> OutputEndpoint:
    """Wrap `inner` so a message id already sent within the TTL is not sent again."""
    return DeduplicationOutput(inner, *_build(options))


def wrap_input(
    inner: InputEndpoint, options: DeduplicationOptions, context: BuildContext
) -> InputEndpoint:
    """Wrap `inner` so a message id already handled within the TTL is dropped."""
    return DeduplicationInput(inner, *_build(options))
