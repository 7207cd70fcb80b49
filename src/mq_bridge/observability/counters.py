"""The route runner's counters: the one source every view of a route's figures reads.

``metrics_snapshot()`` (``mq_bridge.middleware.metrics``), ``/metrics`` (Prometheus, see
``observability.prometheus``) and the console's routes page all read the `RouteCounters`
kept here; nothing keeps a second copy.

The runtime writes them on its hot path, once per batch, so a write must cost next to
nothing: each writing thread has its own `CounterCell` (plain attribute increments, no
lock, one writer each), and a reader sums the cells. A reader may see one batch counted
on one stage and not yet on the next: the figures are a live view, not a transaction.

    stage          counted when                                         by
    received       the input hands out a batch                          route runner
    handled        the handler returned for a message (no handler:      handler stage /
                   the message reached the output side)                 deliverer
    sent           the output endpoint accepted a message               handler stage /
                                                                        deliverer
    acked/nacked   the input acknowledged / handed back a batch         route runner
    retried        the runtime sends a retriable failure again          deliverer
    dropped        a non-retriable failure was logged and dropped       deliverer
    dead_lettered  a dlq middleware sent a message of this route away   metrics middleware
                                                                        on the dlq endpoint

In flight is ``received - acked - nacked``.
"""

from __future__ import annotations

import bisect
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "BATCH_SIZE_BOUNDS",
    "HANDLER_SECONDS_BOUNDS",
    "STAGES",
    "CounterCell",
    "RouteCounters",
    "all_route_counters",
    "reset_route_counters",
    "route_counters",
]

#: The message counters of a route, in pipeline order.
STAGES = (
    "received",
    "handled",
    "sent",
    "acked",
    "nacked",
    "retried",
    "dropped",
    "dead_lettered",
)

#: Upper bounds (seconds) of the handler-time histogram: Prometheus' defaults, finer below.
HANDLER_SECONDS_BOUNDS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
#: Upper bounds of the batch-size histogram: powers of two, 1 to 4096.
BATCH_SIZE_BOUNDS = tuple(2**n for n in range(13))
_LAST_BATCH_BUCKET = len(BATCH_SIZE_BOUNDS)
#: The bucket of each batch size up to the largest bound (a look-up beats arithmetic).
_BATCH_BUCKET = tuple(max(n - 1, 0).bit_length() for n in range(BATCH_SIZE_BOUNDS[-1] + 1))
_TABLE_SIZE = len(_BATCH_BUCKET)


class CounterCell:
    """The counts one thread wrote. Only its own thread writes it; readers sum cells."""

    __slots__ = (
        "acked",
        "batch_buckets",
        "dead_lettered",
        "dropped",
        "errors",
        "handled",
        "handler_buckets",
        "handler_sum",
        "nacked",
        "received",
        "retried",
        "sent",
    )

    def __init__(self) -> None:
        self.received = self.handled = self.sent = self.acked = self.nacked = 0
        self.retried = self.dropped = self.dead_lettered = self.errors = 0
        self.handler_buckets = [0] * (len(HANDLER_SECONDS_BOUNDS) + 1)
        self.handler_sum = 0.0
        self.batch_buckets = [0] * (_LAST_BATCH_BUCKET + 1)

    def observe_batch(self, size: int) -> None:
        """One batch of `size` messages received (the batch sizes' sum is `received`)."""
        self.received += size
        self.batch_buckets[_BATCH_BUCKET[size] if size < _TABLE_SIZE else _LAST_BATCH_BUCKET] += 1

    def observe_handler(self, seconds: float) -> None:
        """The handler took `seconds` over one batch (the handler stage inlines this)."""
        self.handler_sum += seconds
        self.handler_buckets[bisect.bisect_left(HANDLER_SECONDS_BOUNDS, seconds)] += 1


class RouteCounters:
    """Every counter of one route, plus what the console shows beside them.

    `cell()` gives the calling thread its own `CounterCell`; `totals()` sums them.
    """

    def __init__(self, route: str) -> None:
        self.route = route
        self._local = threading.local()
        self._lock = threading.Lock()
        self._shared = CounterCell()  # rare events, and the cells of ended threads
        self._cells: list[tuple[threading.Thread | None, CounterCell]] = [(None, self._shared)]
        self.reconnects = {"input": 0, "output": 0}
        #: side ("input" / "output") -> why it is unhealthy now; empty while all is well
        self.problems: dict[str, str] = {}
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.running = False
        self.started_at: float | None = None
        self._endpoints: dict[str, Callable[[], Any]] = {}

    def cell(self) -> CounterCell:
        """The calling thread's cell (made on its first call)."""
        try:
            cell: CounterCell = self._local.cell
        except AttributeError:
            cell = self._local.cell = CounterCell()
            with self._lock:
                self._fold_ended_threads()
                self._cells.append((threading.current_thread(), cell))
        return cell

    def _fold_ended_threads(self) -> None:
        """Add the cells of threads that ended into the shared one (nobody writes them any
        more), so a route restarted again and again keeps a bounded list."""
        kept = []
        for thread, cell in self._cells:
            if thread is None or thread.is_alive():
                kept.append((thread, cell))
                continue
            for name in (*STAGES, "errors", "handler_sum"):
                setattr(self._shared, name, getattr(self._shared, name) + getattr(cell, name))
            for buckets, more in (
                (self._shared.handler_buckets, cell.handler_buckets),
                (self._shared.batch_buckets, cell.batch_buckets),
            ):
                for index, count in enumerate(more):
                    buckets[index] += count
        self._cells = kept

    def add(self, **counts: int) -> None:
        """Count a rare event from any thread (drops, dead letters): takes a lock."""
        with self._lock:
            for name, count in counts.items():
                setattr(self._shared, name, getattr(self._shared, name) + count)

    def note_error(self, error: BaseException, count: int = 1) -> None:
        """`count` messages failed (maybe to be retried) with `error`; keeps the last one."""
        with self._lock:
            self._shared.errors += count
            self.last_error = f"{type(error).__name__}: {error}"
            self.last_error_at = time.time()

    def set_health(self, side: str, problem: str | None) -> None:
        """`side` is unhealthy for `problem` (a broker away, a message failing), or well
        again with None. Callers call it when the state changes, not per batch."""
        with self._lock:
            if problem is None:
                self.problems.pop(side, None)
            else:
                self.problems[side] = problem

    @property
    def healthy(self) -> bool:
        """False while the input cannot read or the output cannot deliver."""
        return not self.problems

    @property
    def health_reason(self) -> str | None:
        """Why the route is unhealthy (``"output: EndpointUnavailableError: ..."``), or None."""
        problems = dict(self.problems)
        return "; ".join(f"{side}: {problem}" for side, problem in problems.items()) or None

    def note_reconnect(self, side: str) -> None:
        with self._lock:
            self.reconnects[side] += 1

    def attach(self, source: Any, output: Any) -> None:
        """The route's live endpoints, for their status (held weakly where they allow it)."""
        self._endpoints = {"input": _reference(source), "output": _reference(output)}

    def set_running(self, running: bool) -> None:
        self.running = running
        if running:
            self.started_at = time.time()
        with self._lock:
            self.problems.clear()

    def endpoints(self) -> dict[str, Any]:
        """``side -> endpoint`` for the endpoints still alive."""
        alive = {side: ref() for side, ref in self._endpoints.items()}
        return {side: endpoint for side, endpoint in alive.items() if endpoint is not None}

    def totals(self) -> dict[str, Any]:
        """Every counter summed over the cells, with ``in_flight``, ``errors``,
        ``handler_seconds`` and ``batch_size`` (each ``{"buckets", "sum", "count"}``,
        buckets cumulative as Prometheus wants them)."""
        with self._lock:  # folding changes the shared cell: read it all under the lock
            return self._totals([cell for _, cell in self._cells])

    def _totals(self, cells: list[CounterCell]) -> dict[str, Any]:
        figures: dict[str, Any] = {stage: 0 for stage in STAGES}
        figures["errors"] = 0
        handler = [0] * (len(HANDLER_SECONDS_BOUNDS) + 1)
        batches = [0] * (_LAST_BATCH_BUCKET + 1)
        handler_sum = 0.0
        for cell in cells:
            for stage in (*STAGES, "errors"):
                figures[stage] += getattr(cell, stage)
            handler = [a + b for a, b in zip(handler, cell.handler_buckets)]
            batches = [a + b for a, b in zip(batches, cell.batch_buckets)]
            handler_sum += cell.handler_sum
        figures["in_flight"] = max(0, figures["received"] - figures["acked"] - figures["nacked"])
        figures["handler_seconds"] = _histogram(HANDLER_SECONDS_BOUNDS, handler, handler_sum)
        figures["batch_size"] = _histogram(BATCH_SIZE_BOUNDS, batches, figures["received"])
        return figures


def _reference(endpoint: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(endpoint)
    except TypeError:  # a class with __slots__ and no __weakref__: hold it until replaced
        return lambda: endpoint


def _histogram(bounds: tuple[float, ...], counts: list[int], total: float) -> dict[str, Any]:
    cumulative, running = [], 0
    for bound, count in zip((*bounds, float("inf")), counts):
        running += count
        cumulative.append((bound, running))
    return {"buckets": cumulative, "sum": total, "count": running}


_REGISTRY_LOCK = threading.Lock()
_ROUTES: dict[str, RouteCounters] = {}


def route_counters(route: str) -> RouteCounters:
    """The counters of `route` in this process (made on first use; shared by name)."""
    counters = _ROUTES.get(route)
    if counters is None:
        with _REGISTRY_LOCK:
            counters = _ROUTES.setdefault(route, RouteCounters(route))
    return counters


def all_route_counters() -> list[RouteCounters]:
    """Every route's counters, sorted by route name."""
    with _REGISTRY_LOCK:
        return [_ROUTES[name] for name in sorted(_ROUTES)]


def reset_route_counters() -> None:
    """Forget every route's counters (tests; `METRICS.reset()` calls it)."""
    with _REGISTRY_LOCK:
        _ROUTES.clear()
