"""`LoopThread` and `loop_thread()`: asyncio coroutines run from synchronous threads."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from mq_bridge.endpoints.kit import event_loop
from mq_bridge.endpoints.kit.event_loop import THREAD_NAME, LoopThread, loop_thread
from mq_bridge.errors import ClosedError

pytestmark = pytest.mark.timeout(60)
WAIT = 10.0  # the bound on every wait for another thread: generous, never reached


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    thread = LoopThread(name="kit-test-asyncio")
    yield thread
    thread.shutdown()


async def _add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


async def _wait_cancelled(started: threading.Event, cancelled: threading.Event) -> None:
    started.set()
    try:
        await asyncio.Event().wait()  # forever
    except asyncio.CancelledError:
        cancelled.set()
        raise


# --- running coroutines -----------------------------------------------------------------


def test_run_returns_the_result(loop: LoopThread) -> None:
    assert loop.run(_add(2, 3)) == 5
    assert loop.run(_add(1, 1), timeout=WAIT) == 2


def test_run_raises_the_coroutines_exception(loop: LoopThread) -> None:
    async def fail() -> None:
        raise KeyError("nope")

    with pytest.raises(KeyError, match="nope"):
        loop.run(fail())


def test_a_timeout_error_of_the_coroutine_is_not_taken_for_ours(loop: LoopThread) -> None:
    async def time_out() -> None:
        raise TimeoutError("the broker's own")

    with pytest.raises(TimeoutError, match="the broker's own"):
        loop.run(time_out(), timeout=WAIT)


def test_a_timeout_cancels_the_coroutine(loop: LoopThread) -> None:
    started, cancelled = threading.Event(), threading.Event()
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.05 s"):
        loop.run(_wait_cancelled(started, cancelled), timeout=0.05)
    assert cancelled.wait(WAIT), "the coroutine did not see CancelledError"


def test_coroutines_run_on_the_loop_thread(loop: LoopThread) -> None:
    async def thread_name() -> str:
        return threading.current_thread().name

    assert loop.run(thread_name()) == "kit-test-asyncio"


def test_runs_from_several_threads_at_once(loop: LoopThread) -> None:
    threads = 8
    all_started = asyncio.Event()
    arrived = 0

    async def meet(number: int) -> int:
        # Each waits until all have started: they must be running concurrently on the loop.
        nonlocal arrived
        arrived += 1
        if arrived == threads:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), WAIT)
        return number * 10

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(lambda n: loop.run(meet(n), timeout=WAIT), range(threads)))
    assert results == [n * 10 for n in range(threads)]


def test_submit_returns_a_future_and_call_soon_calls_on_the_loop(loop: LoopThread) -> None:
    future = loop.submit(_add(20, 22))
    assert future.result(WAIT) == 42
    called = threading.Event()
    names: list[str] = []

    def record(name: str) -> None:
        names.append(name + threading.current_thread().name)
        called.set()

    loop.call_soon(record, "on ")
    assert called.wait(WAIT)
    assert names == ["on kit-test-asyncio"]


def test_run_on_the_loop_thread_raises_instead_of_deadlocking(loop: LoopThread) -> None:
    async def nested() -> str:
        try:
            loop.run(_add(1, 2))
        except RuntimeError as error:
            return str(error)
        return "no error"

    assert "would deadlock" in loop.run(nested(), timeout=WAIT)


@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    or threading.current_thread() is not threading.main_thread(),
    reason="needs the default SIGINT handler, on the main thread",
)
def test_an_interrupted_run_cancels_the_coroutine(loop: LoopThread) -> None:
    cancelled = threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    async def interrupt_the_caller() -> None:
        # The caller is parked in run() once this runs; Ctrl-C reaches it there.
        signal.pthread_kill(main, signal.SIGINT)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(KeyboardInterrupt):
        loop.run(interrupt_the_caller(), timeout=WAIT)
    assert cancelled.wait(WAIT), "the coroutine did not see CancelledError"


# --- shutting down ----------------------------------------------------------------------


def test_shutdown_cancels_tasks_finalizes_generators_and_stops() -> None:
    loop = LoopThread(name="kit-test-shutdown")
    started, cancelled = threading.Event(), threading.Event()
    generator_closed = threading.Event()

    async def ticks() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            generator_closed.set()

    async def start_generator() -> None:
        global _generator  # kept alive (and unfinished) on purpose
        _generator = ticks()
        await _generator.__anext__()

    loop.submit(_wait_cancelled(started, cancelled))
    loop.run(start_generator(), timeout=WAIT)
    assert started.wait(WAIT)
    loop.shutdown()
    assert cancelled.is_set() and generator_closed.is_set()
    assert loop.closed and loop.loop.is_closed()
    loop.shutdown()  # idempotent
    with pytest.raises(ClosedError):
        loop.run(_add(1, 2))
    with pytest.raises(ClosedError):
        loop.call_soon(print)


_generator: object = None


def test_the_process_loop_thread_is_started_lazily_and_again_after_shutdown() -> None:
    async def current_thread() -> threading.Thread:
        return threading.current_thread()

    first = loop_thread()
    assert loop_thread() is first
    thread = first.run(current_thread())
    assert thread.name == THREAD_NAME and thread.daemon
    first.shutdown()
    second = loop_thread()
    assert second is not first and not second.closed
    assert second.run(current_thread()) is not thread and not thread.is_alive()
    assert sum(thread.name == THREAD_NAME for thread in threading.enumerate()) == 1


def test_shutdown_is_bounded_when_the_loop_is_stuck(caplog: pytest.LogCaptureFixture) -> None:
    loop = LoopThread(name="kit-test-stuck")
    stuck, release = threading.Event(), threading.Event()

    async def block_the_loop() -> None:
        stuck.set()
        release.wait(WAIT)  # a blocking call on the loop: nothing else runs there

    loop.submit(block_the_loop())
    assert stuck.wait(WAIT)
    began = time.monotonic()
    loop.shutdown(timeout=0.1)
    assert time.monotonic() - began < WAIT
    assert "did not stop" in caplog.text
    release.set()
    loop._thread.join(WAIT)  # once unblocked, it drains and stops by itself
    assert not loop._thread.is_alive() and loop.loop.is_closed()


def test_the_interpreter_exits_promptly_with_a_pending_task() -> None:
    script = textwrap.dedent(
        """
        import asyncio
        from mq_bridge.endpoints.kit.event_loop import loop_thread

        async def forever():
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                print("cancelled", flush=True)
                raise

        async def pending_generator():
            try:
                yield 1
                yield 2
            finally:
                print("generator closed", flush=True)

        async def start():
            global generator
            generator = pending_generator()
            await generator.__anext__()

        loop_thread().submit(forever())
        loop_thread().run(start())
        print("exiting", flush=True)
        """
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["exiting", "cancelled", "generator", "closed"]
    assert "Task was destroyed" not in done.stderr
    assert time.monotonic() - began < 15


def test_the_module_registers_its_exit_hook_once() -> None:
    loop_thread()
    loop_thread()
    assert event_loop._atexit_registered
