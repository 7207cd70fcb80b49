"""Runs a set of routes in the foreground until they end, a signal arrives, or a condition.

The first SIGINT (Ctrl-C) or SIGTERM asks every route to stop: each stops taking new
messages, finishes and acknowledges the batches in flight, and closes its endpoints; then
the command exits 0. A second signal quits at once (exit 130; the messages that were in
flight are not acknowledged, so an at-least-once input delivers them again).

"At once" is `os._exit`: unwinding would wait for the route threads (a handler may be
blocked in a call that never returns) and then for the routes' own exit hook, which gives
them up to ten more seconds to close. Nothing is lost by skipping both: a send that returned
is already durable, and what was in flight was not acknowledged.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType

from mq_bridge.cli.progress import ProgressReporter
from mq_bridge.errors import MQBridgeError
from mq_bridge.route import Route

__all__ = ["RouteFailedError", "supervise"]

_WATCH_SECONDS = 0.1
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_INTERRUPTED_EXIT = 130


class RouteFailedError(MQBridgeError):
    """A route ended on an error (its input or output failed for good)."""


def supervise(
    routes: Mapping[str, Route],
    reporter: ProgressReporter,
    stop_when_idle: float | None = None,
    finished: Callable[[], bool] | None = None,
) -> str:
    """Run `routes` until they end, a stop signal, `stop_when_idle` seconds without a new
    message, or `finished()` is true; stop them cleanly. Returns why it stopped."""
    stopping = threading.Event()
    started: list[Route] = []
    with _stop_on_signals(stopping):
        try:
            for route in routes.values():
                route.start()
                started.append(route)
            reason = _watch(routes, reporter, stopping, stop_when_idle, finished)
        except BaseException:
            _stop_and_join(routes, started)  # an error is on its way already: keep it
            raise
        failures = _stop_and_join(routes, started)
    if failures:
        raise RouteFailedError("; ".join(failures))
    return reason


def _watch(
    routes: Mapping[str, Route],
    reporter: ProgressReporter,
    stopping: threading.Event,
    stop_when_idle: float | None,
    finished: Callable[[], bool] | None,
) -> str:
    last_activity, last_change = reporter.activity(), time.monotonic()
    while not stopping.wait(_WATCH_SECONDS):
        reporter.tick()
        ended = [name for name, route in routes.items() if not route.running]
        _raise_if_failed(routes, ended)
        if len(ended) == len(routes):
            return "every input is exhausted"
        if finished is not None and finished():
            return "done"
        reporter.total_done()  # notes the time of the last message done, for the summary
        # Idle: no message received or settled, and none in flight. A batch that takes
        # longer than `stop_when_idle` to handle (a slow handler, a loaded machine) keeps
        # the route busy: it is not the end of the stream.
        activity = reporter.activity()
        if activity != last_activity or any(route.in_flight for route in activity):
            last_activity, last_change = activity, time.monotonic()
        elif stop_when_idle is not None and time.monotonic() - last_change >= stop_when_idle:
            return f"no new message for {stop_when_idle:g} s"
    return "stopped by a signal"


def _raise_if_failed(routes: Mapping[str, Route], ended: list[str]) -> None:
    for name in ended:
        try:
            routes[name].join()
        except Exception as error:
            raise RouteFailedError(f"route {name!r} stopped: {_describe(error)}") from error


def _stop_and_join(routes: Mapping[str, Route], started: list[Route]) -> list[str]:
    """Stop the started routes, wait for each to finish its batches; their errors."""
    for route in started:
        route.stop()
    failures = []
    for name, route in routes.items():
        if route not in started:
            continue
        while route.running:  # our own wait: a second signal must interrupt it at once
            time.sleep(_WATCH_SECONDS)
        try:
            route.join()  # the thread has ended: returns at once, or raises its error
        except Exception as error:
            failures.append(f"route {name!r} stopped: {_describe(error)}")
    return failures


def _describe(error: BaseException) -> str:
    return str(error) if isinstance(error, MQBridgeError) else f"{type(error).__name__}: {error}"


@contextmanager
def _stop_on_signals(stopping: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set `stopping` once; a second one ends the process (exit 130)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are only delivered to the main thread; nothing to install
        return

    def on_signal(number: int, frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        if stopping.is_set():
            _quit_at_once(name)
        stopping.set()
        print(
            f"\nmq-bridge: {name}: finishing the messages in flight "
            "(send it again to quit at once)",
            file=sys.stderr,
            flush=True,
        )

    previous = {number: signal.signal(number, on_signal) for number in _STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _quit_at_once(signal_name: str) -> None:
    """The second stop signal: say so, flush what was printed, and exit without waiting."""
    try:
        print(f"mq-bridge: {signal_name} again: quitting now", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stream must not delay the exit
        pass
    os._exit(_INTERRUPTED_EXIT)
