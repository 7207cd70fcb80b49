"""One asyncio event loop per process, on its own thread, for asyncio-only client libraries.

The bridge's surface is synchronous; clients such as nats-py or aio-pika only speak
asyncio. Their endpoints run coroutines on one shared loop from any thread:

    client = loop_thread().run(nats.connect(url), timeout=10)
    loop_thread().run(client.publish(subject, payload))

`loop_thread()` starts the loop lazily, on a daemon thread named ``mq-bridge-asyncio``.
`LoopThread.run` blocks its caller until the coroutine is done; on a timeout, or when the
caller is interrupted (``KeyboardInterrupt``), it cancels the coroutine. Calling it on the
loop's own thread would deadlock, so that raises `RuntimeError` (await instead).

At interpreter exit the loop first runs the hooks given to `before_loop_exit` (closing
what was left open on it, while it still runs), then cancels its tasks (so connections
close), finalizes async generators and stops, each step bounded; a later `loop_thread()`
starts a fresh loop.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from mq_bridge.errors import ClosedError

__all__ = ["SHUTDOWN_TIMEOUT", "THREAD_NAME", "LoopThread", "before_loop_exit", "loop_thread"]

log = logging.getLogger("mq_bridge.endpoints.event_loop")

T = TypeVar("T")

THREAD_NAME = "mq-bridge-asyncio"
#: The bound on each shutdown step: cancelled tasks finishing, async generators closing,
#: the thread ending.
SHUTDOWN_TIMEOUT = 5.0


class LoopThread:
    """An asyncio event loop running on a daemon thread, started on construction."""

    def __init__(self, name: str = THREAD_NAME) -> None:
        self._loop = asyncio.new_event_loop()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coro` on the loop; its future (cancel it to cancel the coroutine)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._schedule(coro, future)
        return future

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and return its result (or raise its exception).

        After `timeout` seconds the coroutine is cancelled and `TimeoutError` raised; an
        interruption of the waiting thread (``KeyboardInterrupt``) cancels it too.
        """
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "LoopThread.run() was called on the loop's own thread, where it would "
                "deadlock; await the coroutine instead"
            )
        # The future exists before the coroutine is scheduled, so an interruption at any
        # point after scheduling can cancel it.
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            self._schedule(coro, future)
            done, _ = concurrent.futures.wait([future], timeout)
        except BaseException:
            future.cancel()
            raise
        if not done:
            future.cancel()
            raise TimeoutError(f"the coroutine did not finish within {timeout} s; cancelled")
        return future.result()

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Call ``fn(*args)`` on the loop's thread, soon (thread-safe)."""
        if self._closed:
            raise ClosedError("the asyncio loop thread was shut down")
        self._loop.call_soon_threadsafe(fn, *args)

    def shutdown(self, timeout: float = SHUTDOWN_TIMEOUT) -> None:
        """Cancel the pending tasks, finalize async generators, stop and join. Idempotent.

        Each of the three waits at most `timeout` seconds: a task that ignores cancellation
        is abandoned, and so is a loop blocked by a synchronous call (the thread is a
        daemon; a warning says so).
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.shutdown() cannot be called on the loop's thread")
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # The loop stops itself once drained, so nothing scheduled is left unstarted.
        drained = asyncio.run_coroutine_threadsafe(self._drain_and_stop(timeout), self._loop)
        self._thread.join(3 * timeout)
        if self._thread.is_alive():
            log.warning("the asyncio loop thread did not stop within %s s", 3 * timeout)
        elif drained.done() and not drained.cancelled() and drained.exception() is not None:
            log.warning("the asyncio loop did not shut down cleanly", exc_info=drained.exception())

    def _schedule(self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> None:
        if self._closed:
            coro.close()  # no "never awaited" warning
            raise ClosedError("the asyncio loop thread was shut down")
        self._loop.call_soon_threadsafe(self._start, coro, future)

    def _start(self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> None:
        """On the loop: run `coro` as a task whose outcome `future` gets, and which
        cancelling `future` cancels. (`asyncio.run_coroutine_threadsafe` makes its future
        only after scheduling, too late for an interrupted caller to cancel.)"""
        if future.cancelled():
            coro.close()
            return
        task = self._loop.create_task(coro)
        task.add_done_callback(lambda _: _copy_outcome(task, future))
        future.add_done_callback(
            lambda _: future.cancelled() and self._loop.call_soon_threadsafe(task.cancel)
        )

    def _run_forever(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _drain_and_stop(self, timeout: float) -> None:
        try:
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=timeout)
                if pending:
                    log.warning("%d asyncio task(s) ignored cancellation", len(pending))
            await asyncio.wait_for(self._loop.shutdown_asyncgens(), timeout)
        finally:
            self._loop.stop()


def _copy_outcome(task: asyncio.Task[T], future: concurrent.futures.Future[T]) -> None:
    if future.cancelled():
        if not task.cancelled():
            task.exception()  # retrieved: no "exception was never retrieved" log
        return
    if task.cancelled():
        future.cancel()
    elif future.set_running_or_notify_cancel():  # False: cancelled meanwhile
        error = task.exception()
        if error is None:
            future.set_result(task.result())
        else:
            future.set_exception(error)


_lock = threading.Lock()
_current: LoopThread | None = None
_atexit_registered = False
_exit_hooks: list[Callable[[], None]] = []


def loop_thread() -> LoopThread:
    """The process's loop thread, started on first use (again after a shutdown)."""
    global _current, _atexit_registered
    with _lock:
        if _current is None or _current.closed:
            _current = LoopThread()
            if not _atexit_registered:
                atexit.register(_shutdown_at_exit)
                _atexit_registered = True
        return _current


def before_loop_exit(hook: Callable[[], None]) -> None:
    """Call `hook()` at interpreter exit, on the exiting thread, before the loop shuts down
    (once, however often it is given; its errors are logged)."""
    with _lock:
        if hook not in _exit_hooks:
            _exit_hooks.append(hook)


def _shutdown_at_exit() -> None:
    with _lock:
        current, hooks = _current, list(_exit_hooks)
    for hook in hooks:
        try:
            hook()
        except Exception:
            log.warning("an exit hook of the asyncio loop failed", exc_info=True)
    if current is not None:
        current.shutdown()
