"""sqlx (PostgreSQL, MariaDB, SQLite) throughput of mq_bridge, using only the seed's public API.

One script measures us and the peers (each in its own venv), in the same sitting:

    .venv/bin/python bench/sqlx_bench.py --scenario all
    .peers/mq-bridge-py/bin/python bench/sqlx_bench.py --scenario all
    .peers/mq-bridge/bin/python bench/sqlx_bench.py --scenario all

Scenarios, per database (``postgres/…``, ``mariadb/…``, ``sqlite/…``; ~100 B JSON rows;
each figure is the median of --runs):

    send-json    Publisher.send_json one at a time (each returns after its COMMIT)
    send-batch   Publisher.send_batch of 500 rows (one transaction each)
    consume      Consumer.poll(max=500) + commit() with delete_after_read over a pre-filled
                 table, reading .payload, until every row was read (and deleted). Filled
                 with the API's own send_batch; mq-bridge-py 0.3.2 has none, so its table
                 is filled with one INSERT ... SELECT (payload-only rows, as it writes them)

Every table is unique per run, created by the publisher (auto_create_table) and dropped
afterwards: with psql / mysql on PATH (the peers' venvs have no database driver) and the
standard sqlite3 module. SQLite files live in a temporary directory. With
SQLX_BENCH_PEER_TABLE=1 every implementation uses a table made in the peer's layout
(payload only: the same work for all; ours then stores no id or metadata). With
SQLX_BENCH_LISTEN=1 ours runs with ``listen_notify: true`` on PostgreSQL (ignored by the
peers' runs, which do not have it).

Latency instead of throughput (PostgreSQL, default polling_interval_ms of 100):

    .venv/bin/python bench/sqlx_bench.py --latency [--messages 200]

sends one message at a time (send_json), 20-200 ms apart, to a consumer waiting in
``poll(max=10, timeout_ms=1000)`` on another thread, and prints the median, 90th
percentile and maximum of send -> receive (ms); with SQLX_BENCH_LISTEN=1, ours wakes on
NOTIFY instead of its next poll.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from harness import close, run_scenarios
from mq_bridge import Consumer, Message, Publisher

POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
MARIADB = "mysql://root@127.0.0.1:3306/test"
SQLITE_DIR = tempfile.mkdtemp(prefix="sqlx-bench-")
DOC = {
    "order_id": 0,
    "customer": "c-000042",
    "sku": "SKU-7731-BLUE",
    "amount": 129.95,
    "currency": "EUR",
    "n": 0,
}  # ~100 B as compact JSON
METADATA = {"kind": "order.created"}


#: SQLX_BENCH_PEER_TABLE=1: every implementation writes and reads a table made in the
#: peer's layout (id, payload, locked_until, created_at), so all do the same work; by
#: default each publisher creates its own (ours adds message_id and metadata).
PEER_TABLE = os.environ.get("SQLX_BENCH_PEER_TABLE") == "1"
PEER_DDL = {
    "postgres": "CREATE TABLE {0} (id BIGSERIAL PRIMARY KEY, payload BYTEA NOT NULL, "
    "locked_until TIMESTAMPTZ, created_at TIMESTAMPTZ DEFAULT NOW())",
    "mariadb": "CREATE TABLE {0} (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload BLOB NOT NULL, "
    "locked_until DATETIME, created_at DATETIME DEFAULT CURRENT_TIMESTAMP)",
    "sqlite": "CREATE TABLE {0} (id INTEGER PRIMARY KEY AUTOINCREMENT, payload BLOB NOT NULL, "
    "locked_until DATETIME, created_at DATETIME DEFAULT CURRENT_TIMESTAMP)",
}


def new_table(database: str) -> tuple[str, str]:
    """A fresh (url, table) on `database` (made in the peer's layout with PEER_TABLE)."""
    table = f"bench_{uuid.uuid4().hex[:10]}"
    if database == "postgres":
        url = POSTGRES
    elif database == "mariadb":
        url = MARIADB
    else:  # sqlx (the peers) opens a missing SQLite file only with mode=rwc; we accept it too
        url = f"sqlite://{SQLITE_DIR}/{table}.db?mode=rwc"
    if PEER_TABLE:
        index = f"CREATE INDEX idx_{table}_locked_until ON {table} (locked_until)"
        run_sql(url, PEER_DDL[database].format(table), index)
    return url, table


def run_sql(url: str, *statements: str) -> None:
    """`statements` through psql / mysql (the peers' venvs have no driver) or sqlite3."""
    if url.startswith("postgres"):
        command = ["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "postgres"]
        for statement in statements:
            subprocess.run([*command, "-c", statement], check=True)
    elif url.startswith("mysql"):
        command = ["mysql", "-h127.0.0.1", "-uroot", "test"]
        for statement in statements:
            subprocess.run([*command, "-e", statement], check=True)
    else:
        with sqlite3.connect(url.split("//", 1)[1].split("?", 1)[0]) as connection:
            for statement in statements:
                connection.execute(statement)


def drop(url: str, table: str) -> None:
    run_sql(url, f"DROP TABLE IF EXISTS {table}")
    if url.startswith("sqlite"):
        path = url.split("//", 1)[1].split("?", 1)[0]
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)


def sql_fill(url: str, table: str, count: int) -> None:
    """Insert `count` documents with SQL (for an API without `send_batch`: mq-bridge-py)."""
    head = '{"order_id":0,"customer":"c-000042","sku":"SKU-7731-BLUE","amount":129.95,'
    head += '"currency":"EUR","n":'
    if url.startswith("postgres"):
        sql = (
            f"INSERT INTO {table} (payload) SELECT convert_to('{head}' || g || '}}', 'UTF8') "
            f"FROM generate_series(0, {count - 1}) g"
        )
    elif url.startswith("mysql"):
        sql = (
            f"INSERT INTO {table} (payload) SELECT CONCAT('{head}', seq, '}}') "
            f"FROM seq_0_to_{count - 1}"
        )
    else:
        sql = (
            f"WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g "
            f"WHERE n < {count - 1}) INSERT INTO {table} (payload) "
            f"SELECT CAST('{head}' || n || '}}' AS BLOB) FROM g"
        )
    run_sql(url, sql)


#: SQLX_BENCH_LISTEN=1: ours with listen_notify on PostgreSQL (the peers have no such option)
OURS = importlib.util.find_spec("mq_bridge.endpoints") is not None
LISTEN = os.environ.get("SQLX_BENCH_LISTEN") == "1" and OURS


def config(url: str, table: str, **options: Any) -> dict[str, Any]:
    create = not PEER_TABLE
    if LISTEN and url.startswith("postgres"):
        options["listen_notify"] = True
    return {"sqlx": {"url": url, "table": table, "auto_create_table": create, **options}}


def batches(count: int) -> list[list[Message]]:
    return [
        [Message.from_json({**DOC, "n": n}, METADATA) for n in range(s, min(s + 500, count))]
        for s in range(0, count, 500)
    ]


def send_json_run(database: str) -> Callable[[int], float]:
    def run(count: int) -> float:
        url, table = new_table(database)
        try:
            publisher = Publisher.from_config(config(url, table))
            try:
                started = time.perf_counter()
                for n in range(count):
                    DOC["n"] = n
                    publisher.send_json(DOC, METADATA)
                return count / (time.perf_counter() - started)
            finally:
                close(publisher)
        finally:
            drop(url, table)

    return run


def send_batch_run(database: str) -> Callable[[int], float]:
    def run(count: int) -> float:
        url, table = new_table(database)
        data = batches(count)
        try:
            publisher = Publisher.from_config(config(url, table))
            try:
                started = time.perf_counter()
                for batch in data:
                    publisher.send_batch(batch)
                return count / (time.perf_counter() - started)
            finally:
                close(publisher)
        finally:
            drop(url, table)

    return run


def consume_run(database: str) -> Callable[[int], float]:
    def run(count: int) -> float:
        url, table = new_table(database)
        try:
            publisher = Publisher.from_config(config(url, table))  # creates the table
            if hasattr(publisher, "send_batch"):
                for batch in batches(count):
                    publisher.send_batch(batch)
            else:
                sql_fill(url, table, count)
            close(publisher)
            consumer = Consumer.from_config(config(url, table, delete_after_read=True))
            seen, deadline = 0, time.monotonic() + 300
            started = time.perf_counter()
            while seen < count and time.monotonic() < deadline:
                batch = consumer.poll(max=500, timeout_ms=1000)
                for message in batch:
                    _ = message.payload
                seen += len(batch)
                if batch:
                    consumer.commit()
            elapsed = time.perf_counter() - started
            close(consumer)
            if seen != count:
                sys.exit(f"consumed {seen} of {count}")
            return count / elapsed
        finally:
            drop(url, table)

    return run


SCENARIOS: dict[str, tuple[Callable[[int], float], int]] = {}
for _database, _counts in (
    ("postgres", (2_000, 50_000, 50_000)),
    ("mariadb", (2_000, 50_000, 50_000)),
    ("sqlite", (2_000, 50_000, 50_000)),
):
    SCENARIOS[f"{_database}/send-json"] = (send_json_run(_database), _counts[0])
    SCENARIOS[f"{_database}/send-batch"] = (send_batch_run(_database), _counts[1])
    SCENARIOS[f"{_database}/consume"] = (consume_run(_database), _counts[2])


def skip(name: str) -> str | None:
    if name.endswith("send-batch") and not hasattr(Publisher, "send_batch"):
        return "this API has no Publisher.send_batch (mq-bridge-py 0.3.2)"
    return None


def latency(count: int) -> None:
    """Send -> receive latency of single messages to a drained, waiting consumer (ms)."""
    url, table = new_table("postgres")
    latencies: list[float] = []
    numbers: list[int] = []  # which messages arrived (a repeat is a redelivery)
    try:
        publisher = Publisher.from_config(config(url, table))
        consumer = Consumer.from_config(config(url, table, delete_after_read=True))
        consumer.poll(max=10, timeout_ms=200)  # connected and drained

        def receive() -> None:
            while len(latencies) < count:
                batch = consumer.poll(max=10, timeout_ms=1000)
                now = time.perf_counter()
                for message in batch:
                    document = json.loads(message.payload)
                    latencies.append(now - document["t"])
                    numbers.append(document["n"])
                if batch:
                    consumer.commit()

        receiver = threading.Thread(target=receive, daemon=True)
        receiver.start()
        for n in range(count):
            time.sleep(random.uniform(0.02, 0.2))
            publisher.send_json({**DOC, "n": n, "t": time.perf_counter()}, METADATA)
        receiver.join(30)
        close(consumer)
        close(publisher)
    finally:
        drop(url, table)
    ms = sorted(1000 * value for value in latencies)
    label = "listen_notify" if LISTEN else "polling"
    print(
        f"postgres latency ({label}, n={len(ms)}): median {statistics.median(ms):.1f} ms, "
        f"p90 {ms[int(len(ms) * 0.9) - 1]:.1f} ms, max {ms[-1]:.1f} ms, "
        f"redelivered {len(numbers) - len(set(numbers))}",
        flush=True,
    )


if __name__ == "__main__":
    try:
        if "--latency" in sys.argv:
            given = sys.argv[sys.argv.index("--messages") + 1] if "--messages" in sys.argv else 0
            latency(int(given) or 200)
            sys.exit(0)
        run_scenarios(__doc__, SCENARIOS, skip)
    finally:
        shutil.rmtree(SQLITE_DIR, ignore_errors=True)
