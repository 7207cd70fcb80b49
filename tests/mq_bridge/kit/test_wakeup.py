"""`Wakeup`: an interrupt is remembered until a receive consumes it, and only once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mq_bridge.endpoints.kit.wakeup import Wakeup

#: How long a test waits for a wait that should have ended (a hang guard, not a bound).
HANG_GUARD = 10.0


def ends(call: Callable[[], object]) -> object:
    """`call()` on a thread; fails when it is still running after `HANG_GUARD` seconds."""
    result: list[object] = []
    runner = threading.Thread(target=lambda: result.append(call()), daemon=True)
    runner.start()
    runner.join(HANG_GUARD)
    assert not runner.is_alive(), "the wait was not ended"
    return result[0]


def wait(wakeup: Wakeup, ready: Callable[[], object], deadline: float | None) -> bool:
    with wakeup.condition:
        return wakeup.wait_until(ready, deadline)


def test_an_interrupt_before_the_wait_ends_it_at_once_and_is_consumed():
    wakeup = Wakeup()
    wakeup.interrupt()
    assert ends(lambda: wait(wakeup, lambda: False, None)) is True
    assert not wakeup.pending
    # the next wait is a normal one: its deadline (already passed) ends it, not an interrupt
    assert wait(wakeup, lambda: False, time.monotonic()) is False


def test_an_interrupt_ends_a_wait_blocked_in_another_thread():
    wakeup = Wakeup()
    blocked = threading.Event()

    def ready() -> bool:  # asked with the condition held: once set, the waiter is in wait()
        blocked.set()
        return False

    def interrupt_once_blocked() -> None:
        blocked.wait()
        wakeup.interrupt()  # takes the condition: only once the waiter released it

    threading.Thread(target=interrupt_once_blocked, daemon=True).start()
    assert ends(lambda: wait(wakeup, ready, None)) is True


def test_a_ready_wait_consumes_a_pending_interrupt_too():
    wakeup = Wakeup()
    wakeup.interrupt()
    assert wait(wakeup, lambda: True, None) is True
    assert wait(wakeup, lambda: True, None) is False


def test_pause_ends_early_and_leaves_the_interrupt_for_consume():
    wakeup = Wakeup()
    wakeup.interrupt()
    assert ends(lambda: wakeup.pause(HANG_GUARD * 3)) is True
    assert wakeup.pending
    assert wakeup.consume() is True
    assert wakeup.consume() is False
    assert wakeup.pause(0) is False


def test_a_nudge_ends_a_pause_without_interrupting():
    wakeup = Wakeup()
    wakeup.nudge()
    assert ends(lambda: wakeup.pause(HANG_GUARD * 3)) is True
    assert not wakeup.pending
    assert wakeup.pause(0) is False  # consumed by the pause it ended
