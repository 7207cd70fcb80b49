"""delay and limiter."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from mq_bridge.config.declarations import parse_options
from mq_bridge.errors import ConfigError
from mq_bridge.message import Message
from mq_bridge.middleware import delay, limiter
from mq_bridge.middleware._sleep import WakeableSleep
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


class PacedWorld:
    """A fake clock, and sleeps that advance it instead of waiting, recording each wait."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.events: list[tuple[str, float]] = []  # ("sleep", seconds) / ("send", at time)
        world = self

        class Sleep(WakeableSleep):
            def sleep(self, seconds: float) -> bool:
                world.events.append(("sleep", seconds))
                world.clock.now += max(0.0, seconds)
                return True

        self.Sleep = Sleep

    def sends(self) -> list[float]:
        return [value for kind, value in self.events if kind == "send"]

    def sleeps(self) -> list[float]:
        return [value for kind, value in self.events if kind == "sleep"]


class TimedOutput(ListOutput):
    """Notes the fake time of every send."""

    def __init__(self, world: PacedWorld) -> None:
        super().__init__()
        self.world = world

    def send(self, messages: Sequence[Message]) -> None:
        self.world.events.append(("send", self.world.clock.now))
        super().send(messages)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> PacedWorld:
    """Pacing middleware built in this test waits in `world`'s time, not in real time."""
    world = PacedWorld()
    for module in (delay, limiter):
        monkeypatch.setattr(module, "WakeableSleep", world.Sleep)
    monkeypatch.setattr(limiter, "Pacer", lambda rate: Pacer(rate, world.clock))
    return world


def test_limiter_output_spaces_sends_by_their_message_count(world: PacedWorld):
    output = TimedOutput(world)
    wrapped = limiter.wrap_output(output, LimiterOptions(messages_per_second=200), context_with({}))
    for message in numbered(5):
        wrapped.send([message])
    wrapped.send(numbered(4))  # four messages take four shares of the time ...
    wrapped.send(numbered(1))  # ... so the next send waits for all of them
    assert len(output.sent) == 10
    starts = [at - 100.0 for at in world.sends()]
    assert starts == pytest.approx([0.0, 0.005, 0.010, 0.015, 0.020, 0.025, 0.045])


def test_limiter_input_hands_batches_out_at_the_rate(world: PacedWorld):
    messages = numbered(4)
    wrapped = limiter.wrap_input(
        ListInput(messages), LimiterOptions(messages_per_second=1000), context_with({})
    )
    received, handed_out_at = [], []
    for _ in range(4):
        received += wrapped.receive(1, 0).messages
        handed_out_at.append(world.clock.now - 100.0)
    assert received == messages
    assert handed_out_at == pytest.approx([0.0, 0.001, 0.002, 0.003])


def test_delay_output_waits_before_each_send(world: PacedWorld):
    output = TimedOutput(world)
    wrapped = delay.wrap_output(output, DelayOptions(delay_ms=20), context_with({}))
    wrapped.send(numbered(2))
    wrapped.send(numbered(1))
    assert [kind for kind, _ in world.events] == ["sleep", "send", "sleep", "send"]
    assert [value for _, value in world.events] == pytest.approx([0.02, 100.02, 0.02, 100.04])
    assert len(output.sent) == 3


def test_delay_input_holds_only_non_empty_batches(world: PacedWorld):
    source = ListInput(numbered(1))
    wrapped = delay.wrap_input(source, DelayOptions(delay_ms=20), context_with({}))
    assert len(wrapped.receive(10, 0)) == 1
    assert world.sleeps() == [0.02]  # held once, after the batch arrived
    assert len(wrapped.receive(10, 0)) == 0
    assert world.sleeps() == [0.02]  # an empty batch is not held


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
