"""Live progress and the final summary of ``mq-bridge run``, from the `metrics` middleware.

``run`` puts a ``metrics`` middleware first on every route's input (unless the route
already has one there), so the process-wide registry counts each batch the route acks.
It also puts one first on each ``dlq`` endpoint of the route's output, so dead letters are
counted; messages the route dropped are counted by the runtime itself. A `RouteCounter`
reads those counts; `ProgressReporter` turns them into a line on stderr: rewritten in
place on a terminal (ended with a newline by `finish()`), one line per interval otherwise.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from mq_bridge.middleware.metrics import delivery_outcomes, metrics_snapshot

__all__ = ["Activity", "Counts", "ProgressReporter", "RouteCounter", "with_metrics_first"]


def with_metrics_first(route_config: dict[str, Any]) -> dict[str, Any]:
    """A copy of the route config whose input, and each ``dlq`` endpoint of its output,
    has a ``metrics`` middleware first (the caller's config is not changed)."""
    config = {**route_config, "input": _metrics_first(route_config["input"])}
    output = route_config.get("output")
    if isinstance(output, dict) and output.get("middlewares"):
        config["output"] = {
            **output,
            "middlewares": [_metered_dlq(entry) for entry in output["middlewares"]],
        }
    return config


def _metrics_first(endpoint: dict[str, Any]) -> dict[str, Any]:
    middlewares = list(endpoint.get("middlewares") or [])
    if not (middlewares and "metrics" in middlewares[0]):
        middlewares.insert(0, {"metrics": {}})
    return {**endpoint, "middlewares": middlewares}


def _metered_dlq(entry: Any) -> Any:
    """A ``{dlq: {endpoint: ...}}`` entry whose dead-letter endpoint counts what it gets."""
    options = entry.get("dlq") if isinstance(entry, dict) else None
    if not (isinstance(options, dict) and isinstance(options.get("endpoint"), dict)):
        return entry
    return {"dlq": {**options, "endpoint": _metrics_first(options["endpoint"])}}


@dataclass(frozen=True)
class Counts:
    """What a route did with its messages: acked (done, including the failed-for-good
    ones), nacked (handed back for redelivery), dropped and dead-lettered."""

    acked: int = 0
    nacked: int = 0
    dropped: int = 0
    dead_lettered: int = 0

    def __sub__(self, other: Counts) -> Counts:
        return Counts(
            self.acked - other.acked,
            self.nacked - other.nacked,
            self.dropped - other.dropped,
            self.dead_lettered - other.dead_lettered,
        )


@dataclass(frozen=True)
class Activity:
    """Messages an input handed out (received) and those settled (acked or nacked): while
    `received` is ahead, a batch is in flight (being handled or sent), so the route is busy
    even when nothing changes for a while."""

    received: int
    settled: int

    @property
    def in_flight(self) -> bool:
        return self.received > self.settled


@dataclass
class RouteCounter:
    """A route's `Counts` since this counter was made, from the metrics registry."""

    name: str
    baseline: Counts = field(default_factory=Counts)
    baseline_activity: Activity = field(default_factory=lambda: Activity(0, 0))

    def __post_init__(self) -> None:
        # The registry is process-wide: a route name used before in this process keeps counts.
        self.baseline = self._totals()
        self.baseline_activity = self._activity()

    def counts(self) -> Counts:
        """The counts since this counter was made."""
        return self._totals() - self.baseline

    def activity(self) -> Activity:
        """Messages the route's input handed out and settled since this counter was made."""
        now, base = self._activity(), self.baseline_activity
        return Activity(now.received - base.received, now.settled - base.settled)

    def _activity(self) -> Activity:
        series = metrics_snapshot().get(self.name, {}).get("input", {}).values()
        received = sum(int(figures.get("messages", 0)) for figures in series)
        settled = sum(int(figures.get(k, 0)) for figures in series for k in ("acked", "nacked"))
        return Activity(received, settled)

    def _totals(self) -> Counts:
        series = metrics_snapshot().get(self.name, {}).get("input", {})
        acked = sum(int(figures.get("acked", 0)) for figures in series.values())
        nacked = sum(int(figures.get("nacked", 0)) for figures in series.values())
        outcomes = delivery_outcomes(self.name)
        return Counts(acked, nacked, outcomes["dropped"], outcomes["dead_lettered"])


@dataclass
class ProgressReporter:
    """Prints per-route totals and rates every `interval` seconds, then a summary."""

    counters: list[RouteCounter]
    interval: float = 1.0
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    quiet: bool = False
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._last_time = self.started
        self._last_done = [0] * len(self.counters)
        self._next_tick = self.started + self.interval
        self._live = self.stream.isatty()
        self._printed_live = False
        self._last_total = 0
        self.last_activity = self.started

    def tick(self) -> None:
        """Print a progress line if the interval has passed (call it often)."""
        now = time.monotonic()
        if self.quiet or now < self._next_tick:
            return
        self._next_tick = now + self.interval
        counts = [counter.counts() for counter in self.counters]
        done = [figures.acked for figures in counts]
        seconds = max(now - self._last_time, 1e-9)
        parts = [
            f"{counter.name}: {figures.acked:,} done{_in_parentheses(figures)}, "
            f"{(figures.acked - last) / seconds:,.0f} msg/s"
            for counter, figures, last in zip(self.counters, counts, self._last_done)
        ]
        self._last_time, self._last_done = now, done
        line = f"[{now - self.started:6.1f}s] " + " | ".join(parts)
        if self._live:
            self.stream.write("\r\x1b[K" + line)
            self._printed_live = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def total_done(self) -> int:
        """Messages acked by every route so far (noting when the total last changed)."""
        total = sum(counter.counts().acked for counter in self.counters)
        if total != self._last_total:
            self._last_total, self.last_activity = total, time.monotonic()
        return total

    def activity(self) -> list[Activity]:
        """Each route's `Activity`: `--stop-when-idle` waits for it to stop changing with
        nothing in flight."""
        return [counter.activity() for counter in self.counters]

    def dropped(self) -> dict[str, int]:
        """Route name -> messages it dropped so far, for the routes that dropped any."""
        dropped = {counter.name: counter.counts().dropped for counter in self.counters}
        return {name: count for name, count in dropped.items() if count}

    def finish(self) -> None:
        """End the live progress line, so what is printed next starts on a line of its own."""
        if self._printed_live:
            self.stream.write("\n")
            self.stream.flush()
            self._printed_live = False

    def summary(self, out: TextIO) -> None:
        """Per-route totals and average rates, from the start to the last message done.

        Idle time at the end (waiting for ``--stop-when-idle``, or for a signal) is not
        counted, so the rate is the rate of the work."""
        self.finish()
        self.total_done()
        seconds = max(self.last_activity - self.started, 1e-9)
        for counter in self.counters:
            figures = counter.counts()
            redelivered = (
                f", {figures.nacked:,} handed back for redelivery" if figures.nacked else ""
            )
            messages = "message" if figures.acked == 1 else "messages"
            out.write(
                f"route {counter.name}: {figures.acked:,} {messages} in {seconds:.2f} s "
                f"({figures.acked / seconds:,.0f} msg/s){_after_semicolon(figures)}"
                f"{redelivered}\n"
            )
        out.flush()


def _failed_for_good(figures: Counts) -> str:
    """``"2 dropped, 1 dead-lettered"`` for the messages that failed for good, or nothing."""
    parts = [
        f"{count:,} {label}"
        for count, label in ((figures.dropped, "dropped"), (figures.dead_lettered, "dead-lettered"))
        if count
    ]
    return ", ".join(parts)


def _in_parentheses(figures: Counts) -> str:
    failed = _failed_for_good(figures)
    return f" ({failed})" if failed else ""


def _after_semicolon(figures: Counts) -> str:
    failed = _failed_for_good(figures)
    return f"; {failed}" if failed else ""
