"""Live progress and the final summary of ``mq-bridge run``, from the `metrics` middleware.

``run`` puts a ``metrics`` middleware first on every route's input (unless the route
already has one there), so the process-wide registry counts each batch the route acks.
A `RouteCounter` reads that count; `ProgressReporter` turns the counts into a line on
stderr: rewritten in place on a terminal, one line per interval otherwise.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from mq_bridge.middleware.metrics import metrics_snapshot

__all__ = ["ProgressReporter", "RouteCounter", "with_metrics_first"]


def with_metrics_first(route_config: dict[str, Any]) -> dict[str, Any]:
    """A copy of the route config whose input has a ``metrics`` middleware first."""
    source = dict(route_config["input"])
    middlewares = list(source.get("middlewares") or [])
    if not (middlewares and "metrics" in middlewares[0]):
        middlewares.insert(0, {"metrics": {}})
    source["middlewares"] = middlewares
    return {**route_config, "input": source}


@dataclass
class RouteCounter:
    """Messages a route acked (done) and nacked since it was made, from the metrics registry."""

    name: str
    baseline: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        # The registry is process-wide: a route name used before in this process keeps counts.
        self.baseline = self._totals()

    def counts(self) -> tuple[int, int]:
        """(acked, nacked) since this counter was made."""
        acked, nacked = self._totals()
        return acked - self.baseline[0], nacked - self.baseline[1]

    def _totals(self) -> tuple[int, int]:
        series = metrics_snapshot().get(self.name, {}).get("input", {})
        acked = sum(int(figures.get("acked", 0)) for figures in series.values())
        nacked = sum(int(figures.get("nacked", 0)) for figures in series.values())
        return acked, nacked


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
        done = [counter.counts()[0] for counter in self.counters]
        seconds = max(now - self._last_time, 1e-9)
        parts = [
            f"{counter.name}: {total:,} done, {(total - last) / seconds:,.0f} msg/s"
            for counter, total, last in zip(self.counters, done, self._last_done)
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
        total = sum(counter.counts()[0] for counter in self.counters)
        if total != self._last_total:
            self._last_total, self.last_activity = total, time.monotonic()
        return total

    def summary(self, out: TextIO) -> None:
        """Per-route totals and average rates, from the start to the last message done.

        Idle time at the end (waiting for ``--stop-when-idle``, or for a signal) is not
        counted, so the rate is the rate of the work."""
        if self._printed_live:
            self.stream.write("\n")
            self.stream.flush()
        self.total_done()
        seconds = max(self.last_activity - self.started, 1e-9)
        for counter in self.counters:
            acked, nacked = counter.counts()
            redelivered = f", {nacked:,} handed back for redelivery" if nacked else ""
            messages = "message" if acked == 1 else "messages"
            out.write(
                f"route {counter.name}: {acked:,} {messages} in {seconds:.2f} s "
                f"({acked / seconds:,.0f} msg/s){redelivered}\n"
            )
        out.flush()
