"""What the console's pages show, gathered from a twainmq store and this process's routes.

Reads only: topics through ``Twain.describe_topic`` / ``end_offsets``, groups through
``twainmq.admin.describe_group``, messages through a group-less ``Consumer`` assigned to
one partition at the page's first offset (so a page reads that page, never the topic).
The one write, `reset_group`, goes through ``twainmq.admin.reset_offsets``, which
refuses a group with live members.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from mq_bridge.observability.counters import all_route_counters
from mq_bridge.observability.store_stats import (
    GroupRow,
    TopicRow,
    describe_groups,
    describe_topic,
    describe_topics,
    end_offsets,
)
from twainmq import Twain
from twainmq.admin import GroupPaths, UndecodedMessage, describe_group, reset_offsets

__all__ = [
    "MessageRow",
    "RateSampler",
    "StoreView",
    "decode_value",
    "route_rows",
    "sample_routes",
]

#: Longest decoded value a page shows (the rest is cut, and says so).
MAX_SHOWN_CHARS = 2000


@dataclass(frozen=True)
class MessageRow:
    """One message as a page shows it."""

    offset: int
    timestamp: str
    key: str
    value: str
    metadata: dict[str, str]


class StoreView:
    """The console's read-only view of one store (and its one action, `reset_group`)."""

    def __init__(self, store: Twain) -> None:
        self.store = store

    def topics(self) -> list[TopicRow]:
        return describe_topics(self.store)

    def topic(self, name: str) -> TopicRow:
        if not self.store.topic_exists(name):
            raise KeyError(name)
        return describe_topic(self.store, name)

    def groups(self) -> list[GroupRow]:
        return describe_groups(self.store)

    def topic_groups(self, topic: TopicRow) -> list[GroupRow]:
        """The groups that read `topic` (a directory under the store's ``.groups/``), each
        with its commits and lag per partition."""
        return describe_groups(self.store, {topic.name: topic.end_offsets}, topic=topic.name)

    def group(self, topic: str, group: str) -> GroupRow:
        paths = GroupPaths.of(self.store.root_dir, topic, group)
        if not paths.directory.is_dir():
            raise KeyError(f"{topic}/{group}")
        return GroupRow(topic, group, describe_group(paths, end_offsets(self.store, topic)))

    def messages(self, topic: str, partition: int, page: int, size: int) -> list[MessageRow]:
        """Page `page` (0: the newest) of `size` messages of one partition, newest first."""
        described = self.topic(topic).description
        if described is None or not 0 <= partition < len(described.partitions):
            raise KeyError(f"{topic}/{partition}")
        info = described.partitions[partition]
        last = info.end_offset - page * size
        first = max(info.start_offset, last - size)
        if last <= first:
            return []
        rows = self._read(topic, partition, first, last - first)
        return sorted(rows, key=lambda row: row.offset, reverse=True)

    def _read(self, topic: str, partition: int, first: int, count: int) -> list[MessageRow]:
        consumer = self.store.consumer(topic, start_from="now", on_gap="skip")
        try:
            consumer.assign({partition: first})
            rows: list[MessageRow] = []
            while len(rows) < count:
                got = consumer.poll_many(count - len(rows), timeout=0)
                if not got:
                    break
                rows.extend(_row(message) for message in got)
            return rows
        finally:
            consumer.close()

    def reset_plan(self, topic: str, group: str, target: str, offset: int | None) -> dict[int, int]:
        """partition -> new committed offset for `target` ("start", "end" or "offset")."""
        GroupPaths.of(self.store.root_dir, topic, group)  # InvalidGroupNameError before a plan
        described = self.topic(topic).description
        if described is None:
            raise ValueError(f"topic {topic!r} cannot be read")
        plan = {}
        for info in described.partitions:
            if target == "start":
                plan[info.partition] = info.start_offset
            elif target == "end":
                plan[info.partition] = info.end_offset
            elif target == "offset" and offset is not None:
                if not info.start_offset <= offset <= info.end_offset:
                    raise ValueError(
                        f"offset {offset} is outside partition {info.partition}'s "
                        f"{info.start_offset}..{info.end_offset}"
                    )
                plan[info.partition] = offset
            else:
                raise ValueError(f"unknown reset target {target!r}")
        return plan

    def reset_group(self, topic: str, group: str, plan: dict[int, int]) -> None:
        """Commit `plan` for an inactive group (raises GroupActiveError if it has members)."""
        paths = GroupPaths.of(self.store.root_dir, topic, group)
        reset_offsets(paths, plan, partitions=len(plan))


def _row(message: Any) -> MessageRow:
    value, metadata = decode_value(message.message)
    return MessageRow(
        offset=message.offset,
        timestamp=message.timestamp.isoformat(timespec="milliseconds"),
        key=str(message.key),
        value=value,
        metadata=metadata,
    )


def decode_value(value: Any) -> tuple[str, dict[str, str]]:
    """A stored value as text, and its bridge metadata when it is a bridge envelope."""
    metadata: dict[str, str] = {}
    if isinstance(value, bytes) and value.startswith(b"MQB1"):
        from mq_bridge.endpoints.twain.codec import decode_record

        try:
            message = decode_record(value, "", 0, 0)
            value, metadata = message.payload, dict(message.metadata_view)
        except Exception:  # not an envelope after all: show the bytes
            pass
    if isinstance(value, UndecodedMessage):
        text = f"{value.type_name} (not decoded: {value.reason}) {value.json}"
    elif is_dataclass(value) and not isinstance(value, type):
        text = f"{type(value).__name__} {json.dumps(asdict(value), default=str)}"
    elif isinstance(value, bytes):
        try:
            text = value.decode()
        except UnicodeDecodeError:
            text = f"<{len(value)} bytes> {value[:256].hex()}"
    else:
        text = str(value)
    if len(text) > MAX_SHOWN_CHARS:
        text = f"{text[:MAX_SHOWN_CHARS]}… ({len(text):,} characters)"
    return text, metadata


class RateSampler:
    """Messages per second of each route over about the last `window` seconds.

    Every look at a route's counters is kept (one per `spacing` seconds at most): a page,
    ``/api/routes``, and the console's own look every `SAMPLE_INTERVAL` while attached to
    a bridge (`sample_routes`). A rate is the change between the figures now and the
    oldest look kept, at least `window` seconds old once the console has been up that
    long, over the time between. So two reads close together share their base, and a
    route that acks one big batch every few seconds does not read 0 between its acks.
    Before any look is `min_span` old (the console just started), the rate is the average
    since the route started.
    """

    def __init__(
        self,
        window: float = 5.0,
        min_span: float = 0.5,
        spacing: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window, self._min_span, self._spacing = window, min_span, spacing
        self._clock = clock
        self._lock = threading.Lock()
        self._looks: dict[str, deque[tuple[float, int, int]]] = {}

    def rates(
        self, route: str, received: int, acked: int, running_for: float | None = None
    ) -> tuple[float, float]:
        """(received/s, acked/s) of `route`, given its counters now (and, for the first
        looks, how many seconds it has been running)."""
        now = self._clock()
        with self._lock:
            looks = self._looks.setdefault(route, deque())
            if not looks or now - looks[-1][0] >= self._spacing:
                looks.append((now, received, acked))
            while len(looks) > 1 and now - looks[1][0] >= self._window:
                looks.popleft()  # the next one is old enough to be the base
            then, old_received, old_acked = looks[0]
        span = now - then
        if span >= self._min_span:
            return max(received - old_received, 0) / span, max(acked - old_acked, 0) / span
        if running_for is not None and running_for >= self._min_span:
            return received / running_for, acked / running_for
        return 0.0, 0.0


#: Seconds between the console's own looks at the routes' counters (`sample_routes`).
SAMPLE_INTERVAL = 1.0


def sample_routes(sampler: RateSampler) -> None:
    """One look at every route's counters, so the next read has a base to compare with."""
    for counters in all_route_counters():
        totals = counters.totals()
        sampler.rates(counters.route, totals["received"], totals["acked"])


def _running_for(counters: Any) -> float | None:
    started = getattr(counters, "started_at", None)
    if started is None or not getattr(counters, "running", False):
        return None
    return max(time.time() - started, 0.0)


def route_rows(sampler: RateSampler) -> list[dict[str, Any]]:
    """Each route of this process, as the routes page and ``/api/routes`` show it."""
    rows = []
    for counters in all_route_counters():
        totals = counters.totals()
        received_rate, acked_rate = sampler.rates(
            counters.route, totals["received"], totals["acked"], _running_for(counters)
        )
        endpoints = {side: _target(ep) for side, ep in counters.endpoints().items()}
        rows.append(
            {
                "route": counters.route,
                "running": counters.running,
                "input": endpoints.get("input", ""),
                "output": endpoints.get("output", ""),
                "received_per_second": round(received_rate, 1),
                "acked_per_second": round(acked_rate, 1),
                **{k: totals[k] for k in ("received", "handled", "sent", "acked", "nacked")},
                **{k: totals[k] for k in ("retried", "dropped", "dead_lettered", "in_flight")},
                "errors": totals["errors"],
                **_health(counters),
                "last_error": counters.last_error,
                "last_error_at": counters.last_error_at,
                "reconnects": dict(counters.reconnects),
            }
        )
    return rows


def _health(counters: Any) -> dict[str, Any]:
    """A route's health, as its counters give it (routes without the figures: healthy)."""
    healthy = bool(getattr(counters, "healthy", True))
    reason = getattr(counters, "health_reason", None)
    shown = "healthy" if healthy else f"unhealthy: {reason}" if reason else "unhealthy"
    return {"healthy": healthy, "health_reason": reason, "health": shown}


def _target(endpoint: Any) -> str:
    try:
        return str(endpoint.describe())
    except Exception:
        return type(endpoint).__name__
