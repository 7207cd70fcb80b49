"""The routes' rates on the console: a busy route never reads 0 messages per second.

What was wrong: the rate was the change between two reads at least 1 s apart, and a first
read (or any read less than 1 s after the one before) answered the last rate, 0 at first;
a route acking one big batch every few seconds read 0 between its acks. Now each rate is
over about the last 5 s of looks at the counters, which the console takes itself every
second while attached, and the first reads use the average since the route started.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

from mq_bridge import Message, Publisher, Route
from mq_bridge.console import ConsoleServer, ConsoleSettings
from mq_bridge.console.views import RateSampler
from mq_bridge.observability.counters import route_counters
from tests.helpers import wait_until
from tests.mq_bridge.helpers import unique


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_route_that_acks_a_big_batch_every_two_seconds_never_reads_zero() -> None:
    clock = Clock()
    sampler = RateSampler(clock=clock)
    acked, shown = 0, []
    for second in range(1, 21):  # a read each second; 1,000 acked at every even second
        clock.now += 1.0
        if second % 2 == 0:
            acked += 1000
        shown.append(sampler.rates("r", acked, acked)[1])
    assert 0.0 not in shown[5:]  # once the window has filled
    assert all(400 <= rate <= 600 for rate in shown[6:]), shown  # about 500/s


def test_reads_close_together_share_their_base() -> None:
    clock = Clock()
    sampler = RateSampler(clock=clock)
    sampler.rates("r", 0, 0)
    clock.now += 2.0
    first = sampler.rates("r", 200, 100)
    clock.now += 0.01
    second = sampler.rates("r", 201, 101)
    assert first == (100.0, 50.0)
    assert second[0] > 99 and second[1] > 49


def test_the_first_read_is_the_average_since_the_route_started() -> None:
    sampler = RateSampler(clock=Clock())
    assert sampler.rates("r", 300, 150, running_for=3.0) == (100.0, 50.0)
    assert sampler.rates("s", 300, 150, running_for=0.1) == (0.0, 0.0)  # too soon to say
    assert sampler.rates("t", 300, 150) == (0.0, 0.0)


def _row(url: str, route: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/api/routes", timeout=30) as response:
        rows = json.loads(response.read())
    return next(row for row in rows if row["route"] == route)


def test_a_busy_route_shows_its_rates_on_the_first_read_and_on_close_reads() -> None:
    source, name = unique("busy-in"), unique("busy")
    config = {"routes": {name: {"input": {"memory": {"topic": source}}, "output": {"null": None}}}}
    feeding = threading.Event()

    def feed() -> None:
        with Publisher.from_config({"memory": {"topic": source}}) as publisher:
            while not feeding.is_set():
                publisher.send_batch([Message.from_json({"n": n}) for n in range(20)])
                time.sleep(0.01)

    feeder = threading.Thread(target=feed, daemon=True)
    with (
        ConsoleServer(ConsoleSettings(attached=True), 0) as server,
        Route.from_config(config, name),
    ):
        feeder.start()
        try:
            counters = route_counters(name)  # not the console: nothing looked at it yet
            assert wait_until(lambda: counters.totals()["acked"] > 100)
            time.sleep(1.2)  # running a while, as when someone opens the page
            first = _row(server.url, name)
            second = _row(server.url, name)  # right after
            with urllib.request.urlopen(f"{server.url}/routes", timeout=30) as response:
                page = response.read().decode()
        finally:
            feeding.set()
            feeder.join(10)
    for row in (first, second):
        assert row["received_per_second"] > 0 and row["acked_per_second"] > 0, row
    shown = page.split(f'data-route="{name}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-field="acked_per_second">0.0<' not in shown, shown
