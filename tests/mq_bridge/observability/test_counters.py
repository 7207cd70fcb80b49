"""The route runner's counters: per-thread cells summed by readers, and the histograms."""

from __future__ import annotations

import threading

from mq_bridge.observability.counters import (
    BATCH_SIZE_BOUNDS,
    RouteCounters,
    all_route_counters,
    reset_route_counters,
    route_counters,
)


def test_cells_of_several_threads_add_up() -> None:
    counters = RouteCounters("r")

    def work() -> None:
        cell = counters.cell()
        for _ in range(1000):
            cell.observe_batch(3)
            cell.acked += 3

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    totals = counters.totals()
    assert totals["received"] == totals["acked"] == 12_000
    assert totals["in_flight"] == 0
    assert totals["batch_size"]["count"] == 4000
    assert totals["batch_size"]["sum"] == 12_000


def test_batch_sizes_land_in_power_of_two_buckets() -> None:
    counters = RouteCounters("r")
    cell = counters.cell()
    for size in (1, 2, 3, 4, 5, 512, 513, 10_000):
        cell.observe_batch(size)
    buckets = dict(counters.totals()["batch_size"]["buckets"])
    assert buckets[1] == 1  # 1
    assert buckets[2] == 2  # 1, 2
    assert buckets[4] == 4  # ... 3, 4
    assert buckets[8] == 5  # ... 5
    assert buckets[512] == 6
    assert buckets[1024] == 7
    assert buckets[BATCH_SIZE_BOUNDS[-1]] == 7
    assert buckets[float("inf")] == 8


def test_handler_seconds_are_cumulative_and_summed() -> None:
    counters = RouteCounters("r")
    cell = counters.cell()
    for seconds in (0.00005, 0.003, 0.003, 20.0):
        cell.observe_handler(seconds)
    histogram = counters.totals()["handler_seconds"]
    buckets = dict(histogram["buckets"])
    assert buckets[0.0001] == 1
    assert buckets[0.0025] == 1
    assert buckets[0.005] == 3
    assert buckets[10.0] == 3
    assert buckets[float("inf")] == histogram["count"] == 4
    assert abs(histogram["sum"] - 20.00605) < 1e-9


def test_in_flight_and_rare_events() -> None:
    counters = RouteCounters("r")
    cell = counters.cell()
    cell.observe_batch(10)
    cell.acked += 4
    counters.add(dropped=2, dead_lettered=1)
    counters.note_error(ValueError("boom"), 3)
    counters.note_reconnect("input")
    totals = counters.totals()
    assert totals["in_flight"] == 6
    assert (totals["dropped"], totals["dead_lettered"], totals["errors"]) == (2, 1, 3)
    assert counters.last_error == "ValueError: boom"
    assert counters.reconnects == {"input": 1, "output": 0}


def test_registry_shares_counters_by_route_name() -> None:
    reset_route_counters()
    assert route_counters("a") is route_counters("a")
    route_counters("b")
    assert [c.route for c in all_route_counters()] == ["a", "b"]
    reset_route_counters()
    assert all_route_counters() == []


def test_cells_of_ended_threads_are_folded_and_keep_their_counts() -> None:
    counters = RouteCounters("r")

    def work() -> None:
        cell = counters.cell()
        cell.observe_batch(2)
        cell.acked += 2
        cell.observe_handler(0.003)

    for _ in range(50):  # a route restarted again and again: a new thread each time
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    counters.cell()  # a new cell folds the ended threads' ones
    assert len(counters._cells) <= 3  # the shared cell, the last worker's at most, ours
    totals = counters.totals()
    assert totals["received"] == totals["acked"] == 100
    assert totals["batch_size"]["count"] == totals["handler_seconds"]["count"] == 50
    assert abs(totals["handler_seconds"]["sum"] - 0.15) < 1e-9
