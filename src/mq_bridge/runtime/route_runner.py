"""The loop a route's thread runs: receive a batch, deliver it, acknowledge it.

Two shapes, picked by MQ_BRIDGE_PY_HANDLER_EXECUTOR and the route's `concurrency`:

    direct (concurrency 1)   one thread: receive -> handler + send -> ack -> receive ...
                             no hand-off at all; the lowest latency.
    worker (or concurrency > 1)
                             the route thread receives and submits each batch to a pool
                             of `concurrency` handler threads; an acker thread acks batches
                             in source order as they finish. Receiving overlaps handling,
                             which pays off when the input or the handler waits on I/O.

In-flight batches are bounded by `commit_concurrency_limit` (the route stops reading until
a commit finishes) and by MQ_BRIDGE_PY_HANDLER_CONCURRENCY (max batches being handled).
Once one batch is nacked (the route stopped while retrying it), every later one is nacked
too, so cumulative-ack inputs never ack past a message that was not delivered.

The loop counts what it receives, acks and nacks (and its reconnects) in the route's
`RouteCounters` (``mq_bridge.observability.counters``): one thread-private cell per
writing thread, a few integer additions per batch.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from mq_bridge.endpoints.base import Batch, InputEndpoint
from mq_bridge.endpoints.kit.backoff import Backoff
from mq_bridge.message import Message
from mq_bridge.observability.counters import route_counters
from mq_bridge.runtime.delivery import Deliverer
from mq_bridge.runtime.failures import ErrorLog, describe, is_reconnectable
from mq_bridge.runtime.gc_policy import GcPolicy

__all__ = ["RouteRunner", "RunnerSettings", "route_backoff"]

_log = logging.getLogger("mq_bridge.route")

RECEIVE_TIMEOUT = 0.5
#: The first wait of a route's backoff; it doubles up to `reconnect_interval_ms`.
FIRST_BACKOFF = 0.01


def route_backoff(reconnect_interval: float) -> Backoff:
    """The backoff of a route's reconnects and held messages: 10 ms doubling up to
    `reconnect_interval` seconds, with 20 % jitter."""
    return Backoff(FIRST_BACKOFF, max(reconnect_interval, FIRST_BACKOFF), 2.0, 0.2)


@dataclass(frozen=True)
class RunnerSettings:
    """The route options and knobs the loop needs (seconds, not milliseconds)."""

    name: str
    batch_size: int
    pipelined: bool
    concurrency: int
    max_in_flight: int
    max_handling: int
    empty_batch_delay: float
    reconnect_interval: float


class RouteRunner:
    """Runs one route until `stopping` is set or a bounded input is exhausted."""

    def __init__(
        self,
        source: InputEndpoint,
        deliverer: Deliverer,
        settings: RunnerSettings,
        stopping: threading.Event,
        gc_policy: GcPolicy,
    ) -> None:
        self._input = source
        self._deliverer = deliverer
        self._settings = settings
        self._stopping = stopping
        self._gc = gc_policy
        self.error: BaseException | None = None
        self._counters = route_counters(settings.name)
        self._counters.attach(source, deliverer.output)
        self._backoff = route_backoff(settings.reconnect_interval)
        self._errors = ErrorLog(_log, settings.name)
        self._input_down = False
        self._deliver: Callable[[Sequence[Message]], bool] = deliverer.deliver
        from mq_bridge.observability import tracing

        if tracing.enabled():  # off: nothing wraps delivery, so it costs nothing
            self._deliver = tracing.traced_delivery(
                self._deliver, settings.name, source.describe(), deliverer.output.describe()
            )

    def run(self) -> None:
        """The route thread's body: never raises; a fatal error is kept in `error`."""
        self._gc.begin()
        self._counters.set_running(True)
        try:
            self._run_pipelined() if self._settings.pipelined else self._run_direct()
        except BaseException as error:  # kept for join() to re-raise in the caller
            _log.error("route %s stopped on an error: %r", self._settings.name, error)
            self.error = error
        finally:
            self._counters.set_running(False)
            self._gc.end()

    def _run_direct(self) -> None:
        deliver = self._deliver
        source = self._input
        stopping = self._stopping
        gc_tick = self._gc.tick
        cell = self._counters.cell()
        while not stopping.is_set():
            batch = self._receive()
            if batch is None:
                break
            if not batch:
                continue
            size = len(batch.messages)
            cell.observe_batch(size)
            if deliver(batch.messages):
                try:
                    source.ack(batch)
                except Exception as error:
                    self._ack_failed(error)
                else:
                    cell.acked += size
            else:
                source.nack(batch)
                cell.nacked += size
                break
            gc_tick(size)

    def _ack_failed(self, error: Exception) -> None:
        """An ack that could not reach the broker (its connection just went) loses nothing:
        the batch was delivered, and the broker gives it again (at least once); the receive
        that follows meets the broken connection and reconnects. Anything else ends the
        route."""
        if not is_reconnectable(error) or self._stopping.is_set():
            raise error
        self._errors.failed("an ack did not reach the input; it will redeliver", error)

    def _receive(self) -> Batch | None:
        """The next batch (maybe empty), or None when the input is exhausted or stopping."""
        settings = self._settings
        try:
            batch = self._input.receive(settings.batch_size, RECEIVE_TIMEOUT)
        except Exception as error:
            if self._stopping.is_set():
                return None
            if not is_reconnectable(error):
                raise
            self._reconnect_input(error)
            return Batch([])
        if self._input_down:
            self._input_down = False
            self._counters.set_health("input", None)
            _log.warning("route %s: the input reads again", settings.name)
        if batch:
            return batch
        if self._input.exhausted:
            return None
        if settings.empty_batch_delay and self._stopping.wait(settings.empty_batch_delay):
            return None
        return batch

    def _reconnect_input(self, error: Exception) -> None:
        """Close and connect the input again, with backoff, until it connects or the route
        stops. A broker restart never ends the route: what was not acknowledged comes again."""
        self._input_down = True
        attempt = 0
        while True:
            attempt += 1
            self._counters.set_health("input", f"reconnecting: {describe(error)}")
            self._errors.failed(f"the input failed; reconnecting (attempt {attempt})", error)
            if self._stopping.wait(self._backoff.delay(attempt)):
                return
            self._counters.note_reconnect("input")
            try:
                self._input.close()
                self._input.connect()
                return
            except Exception as reconnect_error:
                if not is_reconnectable(reconnect_error):
                    raise
                error = reconnect_error

    def _run_pipelined(self) -> None:
        settings = self._settings
        in_flight: queue.Queue[tuple[Batch, Future[bool]] | None] = queue.Queue(
            settings.max_in_flight
        )
        handling = threading.BoundedSemaphore(settings.max_handling or 1 << 30)
        acker = threading.Thread(
            target=self._ack_in_order, args=(in_flight,), name=f"{settings.name}-acks"
        )
        acker.start()
        pool = ThreadPoolExecutor(settings.concurrency, thread_name_prefix=settings.name)
        try:
            self._read_and_submit(pool, in_flight, handling)
        finally:
            in_flight.put(None)
            acker.join()
            pool.shutdown(wait=True)

    def _read_and_submit(
        self,
        pool: ThreadPoolExecutor,
        in_flight: queue.Queue[tuple[Batch, Future[bool]] | None],
        handling: threading.BoundedSemaphore,
    ) -> None:
        deliver = self._deliver
        cell = self._counters.cell()
        while not self._stopping.is_set():
            batch = self._receive()
            if batch is None:
                break
            if not batch:
                continue
            cell.observe_batch(len(batch.messages))
            handling.acquire()
            future = pool.submit(deliver, batch.messages)
            future.add_done_callback(lambda _: handling.release())
            in_flight.put((batch, future))
            self._gc.tick(len(batch.messages))

    def _ack_in_order(self, in_flight: queue.Queue[tuple[Batch, Future[bool]] | None]) -> None:
        nacking = False
        cell = self._counters.cell()
        while (item := in_flight.get()) is not None:
            batch, future = item
            try:
                delivered = future.result()
            except BaseException as error:  # a bug in delivery: keep the batch, stop the route
                _log.error("route %s: delivery failed: %r", self._settings.name, error)
                delivered = False
            try:
                if delivered and not nacking:
                    try:
                        self._input.ack(batch)
                    except Exception as error:
                        self._ack_failed(error)
                    else:
                        cell.acked += len(batch.messages)
                    continue
                nacking = True
                self._stopping.set()
                self._input.nack(batch)
                cell.nacked += len(batch.messages)
            except Exception as error:  # keep draining so the reader never blocks on a full queue
                _log.error("route %s: acknowledging failed: %r", self._settings.name, error)
                self.error = self.error or error
                nacking = True
                self._stopping.set()
