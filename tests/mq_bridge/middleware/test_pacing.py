"""delay and limiter."""

from __future__ import annotations

import threading
import time

import pytest

from mq_bridge.config.declarations import parse_options
from mq_bridge.errors import ConfigError
from mq_bridge.middleware import delay, limiter
from mq_bridge.middleware.delay import DelayOptions
from mq_bridge.middleware.limiter import LimiterOptions, Pacer

from .endpoints import ListInput, ListOutput, context_with, numbered


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_pacer_gives_each_message_its_share_of_a_second():
    clock = FakeClock()
    pacer = Pacer(10.0, clock)
    assert pacer.reserve(5) == 0.0  # on time: go at once
    assert pacer.reserve(5) == pytest.approx(0.5)  # waits for the first 5 messages' 0.5 s
    clock.now += 2.0  # idle: the pace restarts, no burst is saved up
    assert pacer.reserve(1) == 0.0
    assert pacer.reserve(1) == pytest.approx(0.1)


def test_limiter_output_sends_everything_paced():
    output = ListOutput()
    wrapped = limiter.wrap_output(output, LimiterOptions(messages_per_second=200), context_with({}))
    started = time.monotonic()
    for message in numbered(10):
        wrapped.send([message])
    assert len(output.sent) == 10
    assert time.monotonic() - started >= 9 / 200  # nine gaps of 5 ms at least


def test_limiter_input_hands_out_everything():
    messages = numbered(4)
    wrapped = limiter.wrap_input(
        ListInput(messages), LimiterOptions(messages_per_second=1000), context_with({})
    )
    received = [m for _ in range(4) for m in wrapped.receive(1, 0).messages]
    assert received == messages


def test_delay_output_waits_before_each_send():
    output = ListOutput()
    wrapped = delay.wrap_output(output, DelayOptions(delay_ms=20), context_with({}))
    started = time.monotonic()
    wrapped.send(numbered(2))
    assert time.monotonic() - started >= 0.02 and len(output.sent) == 2


def test_delay_input_holds_only_non_empty_batches():
    source = ListInput(numbered(1))
    wrapped = delay.wrap_input(source, DelayOptions(delay_ms=20), context_with({}))
    started = time.monotonic()
    assert len(wrapped.receive(10, 0)) == 1
    assert time.monotonic() - started >= 0.02


def test_close_ends_a_long_delay_so_shutdown_is_not_held_up():
    output = ListOutput()
    wrapped = delay.wrap_output(output, DelayOptions(delay_ms=600_000), context_with({}))
    sender = threading.Thread(target=wrapped.send, args=(numbered(1),))
    sender.start()
    wrapped.close()
    sender.join(timeout=60)
    assert not sender.is_alive()


def test_interrupt_ends_a_long_input_delay():
    wrapped = delay.wrap_input(
        ListInput(numbered(1)), DelayOptions(delay_ms=600_000), context_with({})
    )
    got: list[int] = []
    receiver = threading.Thread(target=lambda: got.append(len(wrapped.receive(1, 0))))
    receiver.start()
    deadline = time.monotonic() + 60
    while receiver.is_alive() and time.monotonic() < deadline:
        wrapped.interrupt()  # again until it lands inside the wait
        receiver.join(timeout=0.05)
    assert got == [1]


@pytest.mark.parametrize(
    ("module", "options", "field"),
    [
        (limiter, {"messages_per_second": 0}, r"limiter\.messages_per_second"),
        (limiter, {}, r"limiter\.messages_per_second"),
        (delay, {"delay_ms": -1}, r"delay\.delay_ms"),
    ],
)
def test_bad_options_name_the_field(module, options, field):
    name = module.__name__.rsplit(".", 1)[-1]
    with pytest.raises(ConfigError, match=field):
        module.wrap_output(
            ListOutput(), parse_options(module.OPTIONS, options, name), context_with({})
        )
