"""Competing `sqlx` consumers in separate processes: each row is taken once, and the rows
of a consumer killed with SIGKILL come back: when its lease ends, or at once on PostgreSQL
with delete_after_read (its claim is an open transaction, rolled back with the connection);
those of a consumer that hangs (SIGSTOP) come back when its lease ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mq_bridge import Consumer, Publisher
from tests.mq_bridge.endpoints.test_sqlx import db, drop_table

__all__ = ["db", "drop_table"]  # the fixture, imported for this module's tests

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]

# A consumer process: takes rows until the table stays empty for 2 s, acking each batch;
# prints one payload per line. With "hold", it claims one batch, says so, and waits to die.
CONSUMER = """
import sys, time
from mq_bridge import Consumer
url, table, mode = sys.argv[1:4]
config = {"sqlx": {"url": url, "table": table, "delete_after_read": True,
                   "polling_interval_ms": 10, "lease_ms": 3000}}
with Consumer.from_config(config) as consumer:
    if mode == "hold":
        batch = consumer.poll(max=5, timeout_ms=10000)
        print("claimed", *[m.payload.decode() for m in batch], flush=True)
        time.sleep(600)
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 2.0:
        batch = consumer.poll(max=10, timeout_ms=100)
        if batch:
            print(*[m.payload.decode() for m in batch], sep="\\n", flush=True)
            consumer.commit()
            idle_since = time.monotonic()
"""


def start_consumer(url: str, table: str, mode: str = "drain") -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [sys.executable, "-c", CONSUMER, url, table, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def fill(url: str, table: str, count: int) -> None:
    config = {"sqlx": {"url": url, "table": table, "auto_create_table": True}}
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([str(i).encode() for i in range(count)])


def test_two_consumer_processes_take_every_row_exactly_once(db):
    url, table = db
    count = 2000
    fill(url, table, count)
    consumers = [start_consumer(url, table) for _ in range(2)]
    outputs = []
    for process in consumers:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        outputs.append(out.split())
    taken = outputs[0] + outputs[1]
    assert len(taken) == count, f"{len(taken) - len(set(taken))} rows were taken twice"
    assert sorted(map(int, taken)) == list(range(count))


def test_a_killed_consumers_rows_come_back_after_its_lease(db):
    url, table = db
    fill(url, table, 8)
    holder = start_consumer(url, table, "hold")
    try:
        claimed = held_rows(holder)
        holder.send_signal(signal.SIGKILL)  # no nack, no close: its rows stay leased
        holder.wait(30)
        config = {"sqlx": {"url": url, "table": table, "delete_after_read": True}}
        if url.startswith("postgres"):  # the server rolled its claim back with the connection
            assert sorted(take(config, 8, 30.0), key=int) == [str(i) for i in range(8)]
            return
        with Consumer.from_config(config) as consumer:
            first = consumer.poll(max=10, timeout_ms=5000)
            assert [m.payload.decode() for m in first] == ["5", "6", "7"]  # not the leased
            consumer.commit()
            started, back = time.monotonic(), []
            while len(back) < 5 and time.monotonic() - started < 30:
                back += [m.payload.decode() for m in consumer.poll(max=10, timeout_ms=500)]
            consumer.commit()
        assert back == claimed
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


def held_rows(holder: subprocess.Popen[str]) -> list[str]:
    """What a consumer started with "hold" says it claimed (rows 0-4)."""
    line = holder.stdout.readline() if holder.stdout else ""
    assert line.split()[:1] == ["claimed"], holder.stderr.read() if holder.stderr else ""
    claimed = line.split()[1:]
    assert claimed == ["0", "1", "2", "3", "4"]
    return claimed


def take(config: dict, count: int, timeout: float) -> list[str]:
    """Up to `count` payloads, acked, within `timeout` seconds."""
    got: list[str] = []
    with Consumer.from_config(config) as consumer:
        started = time.monotonic()
        while len(got) < count and time.monotonic() - started < timeout:
            got += [m.payload.decode() for m in consumer.poll(max=10, timeout_ms=500)]
            consumer.commit()
    return got


def test_a_hung_consumers_rows_come_back_after_its_lease(db):
    """A consumer that stops (SIGSTOP) keeps its connection open: on PostgreSQL its held
    claim is ended by the server after lease_ms idle (3 s here), elsewhere its lease runs
    out; either way the rows are taken by another consumer, and only once."""
    url, table = db
    fill(url, table, 8)
    holder = start_consumer(url, table, "hold")
    try:
        claimed = held_rows(holder)
        holder.send_signal(signal.SIGSTOP)
        config = {"sqlx": {"url": url, "table": table, "delete_after_read": True}}
        got = take(config, 8, 30.0)
        assert sorted(got, key=int) == [str(i) for i in range(8)], got
        assert set(claimed) <= set(got)
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait(30)
