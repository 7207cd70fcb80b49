"""weak_join: join messages that share a metadata key into one, within a time window.

Input only. Messages carrying the `group_by` metadata key are held back until their group
is complete, then handed out as one joined message; messages without the key pass through.

- **Count mode** (default): a group is complete with `expected_count` messages. The joined
  payload is a JSON array of the members' payloads, in arrival order.
- **Branch mode** (`branch_by` set): each member names its branch in that metadata key; a
  group is complete when every branch in `required` has arrived (or, without `required`,
  `expected_count` distinct branches). The joined payload is a JSON object keyed by branch
  (a branch that arrives twice keeps its latest payload).

Members' payloads go in as JSON when they are JSON, else as text. The joined message has
the first member's metadata plus ``mqb.join.count`` (members joined) and
``mqb.join.complete`` (``true``/``false``); it gets a new id.

A group still open `timeout_ms` after its first member arrived is joined as it is
(``on_timeout: fire``) or dropped (``on_timeout: discard``; its members count as handled).

Acknowledgement (``ack``): with ``on_join`` (default) a source message is acked only once
the joined message it went into is acked, so a crash redelivers open groups; the input's
batches are still acked in the order they were received. With ``on_receive`` members are
settled as soon as they are held (open groups are lost on a crash), for sources that would
otherwise stop delivering while many messages wait in open groups. Nacking a joined message
nacks the batches its members came from; their other members leave their open groups, as
they will be delivered again.

Options::

    weak_join:
      group_by: correlation_id
      expected_count: 2
      timeout_ms: 5000
      branch_by: source          # optional: branch mode
      required: [billing, shipping]
      on_timeout: fire           # or discard
      ack: on_join               # or on_receive
"""

from __future__ import annotations

import threading
import time
from typing import Literal

from pydantic import Field

from mq_bridge.config.declarations import MAX_MILLISECONDS, Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.message import Message
from mq_bridge.middleware._join_groups import JoinGroup, JoinRule
from mq_bridge.middleware._ordered_acks import OrderedAcks, Pending
from mq_bridge.middleware.base import InputMiddleware

__all__ = ["OPTIONS", "WeakJoinOptions", "wrap_input"]


class WeakJoinOptions(Options):
    """Holds messages sharing the group_by metadata value until expected_count (or the
    required branches) arrived, then hands out one joined JSON message."""

    group_by: str = Field(min_length=1, description="Metadata key the members share.")
    expected_count: int = Field(
        ge=1,
        description="Members (count mode) or distinct branches (branch mode) to wait for.",
    )
    timeout_ms: int = Field(
        ge=0,
        le=MAX_MILLISECONDS,
        description="How long a group may stay open, from its first member.",
    )
    branch_by: str | None = Field(
        None, description="Metadata key naming each member's branch; enables branch mode."
    )
    required: tuple[str, ...] = Field(
        (),
        description="Branches that must all arrive (branch mode; overrides expected_count).",
    )
    on_timeout: Literal["fire", "discard"] = Field(
        "fire",
        description="An incomplete group at its timeout: fire (join what arrived) or discard.",
    )
    ack: Literal["on_join", "on_receive"] = Field(
        "on_join",
        description="When members are acknowledged: on_join (with the joined message) "
        "or on_receive.",
    )


OPTIONS = WeakJoinOptions

#: A message ready to hand out, with the inner batches of the messages it stands for.
Ready = tuple[Message, list[Pending]]


class WeakJoinInput(InputMiddleware):
    """Holds grouped messages back and hands out one joined message per group."""

    def __init__(self, inner: InputEndpoint, rule: JoinRule, ack_on_receive: bool) -> None:
        super().__init__(inner)
        self.rule = rule
        self.ack_on_receive = ack_on_receive
        self.acks = OrderedAcks(inner)
        self._groups: dict[str, JoinGroup] = {}  # insertion order = deadline order
        self._ready: list[Ready] = []
        self._unsettled: dict[Pending, int] = {}  # messages of a batch not yet acked
        self._wakeup = Wakeup()
        # receive runs on the route's thread, acks may come from handler workers
        self._lock = threading.Lock()

    @property
    def acks_in_any_order(self) -> bool:  # type: ignore[override]
        return True  # OrderedAcks keeps the inner order; our own batches may finish in any

    @property
    def exhausted(self) -> bool:
        return self.inner.exhausted and not self._groups and not self._ready

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        ends = None if timeout is None else time.monotonic() + timeout
        wakeup = self._wakeup
        while True:
            with self._lock:
                self._expire(time.monotonic())
                if self._ready:
                    # (A pending interrupt is left for the next receive: the inner one
                    # consumes its own there, returning at once.)
                    return self._hand_out(max_messages)
                wait, until_group = self._wait(ends)
            batch = self.inner.receive(max_messages, wait)  # at once when interrupted
            interrupted = wakeup.consume()
            if batch:
                with self._lock:
                    self._take(batch)
                if not interrupted:
                    continue
                with self._lock:
                    if self._ready:
                        return self._hand_out(max_messages)
            if interrupted or not until_group or self.inner.exhausted:
                # The caller's time is up, the receive was interrupted, or a bounded source
                # has nothing more: the caller comes back, and open groups expire then.
                return Batch([])

    def interrupt(self) -> None:
        self._wakeup.interrupt()
        self.inner.interrupt()

    def _wait(self, ends: float | None) -> tuple[float | None, bool]:
        """How long the next inner receive may block, and whether a group's deadline (not
        the caller's timeout) set it."""
        now = time.monotonic()
        caller = None if ends is None else max(0.0, ends - now)
        if not self._groups:
            return caller, False
        group = max(0.0, next(iter(self._groups.values())).deadline - now)
        if caller is not None and caller <= group:
            return caller, False
        return group, True

    def _take(self, batch: Batch) -> None:
        pending = self.acks.handed_out(batch)
        self._unsettled[pending] = len(batch)
        for message in batch.messages:
            key = message.get(self.rule.group_by)
            if key is None or not self.rule.is_member(message):
                self._ready.append((message, [pending]))
                continue
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = JoinGroup(key, time.monotonic() + self.rule.timeout)
            group.add(message, pending)
            if self.ack_on_receive:
                self._settle([pending])
            if self.rule.is_complete(group):
                del self._groups[key]
                self._ready.append(self._joined(group, complete=True))

    def _joined(self, group: JoinGroup, complete: bool) -> Ready:
        sources = [] if self.ack_on_receive else group.sources()
        return group.joined(self.rule, complete), sources

    def _expire(self, now: float) -> None:
        while self._groups:
            key, group = next(iter(self._groups.items()))
            if group.deadline > now:
                return
            del self._groups[key]
            if self.rule.discard_on_timeout:
                if not self.ack_on_receive:
                    self._settle(group.sources())
            else:
                self._ready.append(self._joined(group, complete=False))

    def _hand_out(self, max_messages: int) -> Batch:
        taken, self._ready = self._ready[:max_messages], self._ready[max_messages:]
        return Batch([message for message, _ in taken], [sources for _, sources in taken])

    def _settle(self, sources: list[Pending]) -> None:
        for pending in sources:
            left = self._unsettled.get(pending)
            if left is None:
                continue
            if left > 1:
                self._unsettled[pending] = left - 1
            else:
                del self._unsettled[pending]
                self.acks.done(pending)

    def ack(self, batch: Batch) -> None:
        with self._lock:
            for sources in batch.token:
                self._settle(sources)

    def nack(self, batch: Batch) -> None:
        failed = {pending for sources in batch.token for pending in sources}
        with self._lock:
            for pending in failed:
                if self._unsettled.pop(pending, None) is not None:
                    self.acks.failed(pending)
            for key, group in list(self._groups.items()):
                if not group.drop_sources(failed):
                    del self._groups[key]
            # Not handed out yet and wholly from nacked batches: those come again.
            self._ready = [r for r in self._ready if not r[1] or not set(r[1]) <= failed]


def _rule_from(options: WeakJoinOptions) -> JoinRule:
    return JoinRule(
        group_by=options.group_by,
        expected_count=options.expected_count,
        timeout=options.timeout_ms / 1000,
        branch_by=options.branch_by,
        required=frozenset(options.required),
        discard_on_timeout=options.on_timeout == "discard",
    )


def wrap_input(
    inner: InputEndpoint, options: WeakJoinOptions, context: BuildContext
) -> InputEndpoint:
    """Wrap `inner` so messages sharing `group_by` are handed out joined."""
    return WeakJoinInput(inner, _rule_from(options), options.ack == "on_receive")
