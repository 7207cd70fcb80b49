"""The `sqlx` endpoint on real databases: PostgreSQL, MariaDB and SQLite (a file).

Every test makes a uniquely named table and drops it afterwards (the servers are shared).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.endpoints.base import Batch, InputEndpoint
from mq_bridge.errors import ConfigError, EndpointUnavailableError
from tests.brokers import require_broker
from tests.mq_bridge.helpers import open_input, open_output

DATABASES = ["postgres", "mysql", "sqlite"]


# -- helpers (also used by the contract cases and the other test_sqlx* modules) ------------


def unique_table(prefix: str = "mqb_test") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def execute(url: str, *statements: str) -> list[Any]:
    """Run `statements` on `url`'s database (our own driver use, not the endpoint's);
    the rows of the last one."""
    import sqlalchemy

    from mq_bridge.endpoints.sqlx.options import SqlxOptions
    from mq_bridge.endpoints.sqlx.urls import engine_url

    options = SqlxOptions.model_validate({"url": url, "table": "unused"})
    sa_url, arguments, _ = engine_url(options)
    engine = sqlalchemy.create_engine(sa_url, connect_args=arguments, poolclass=sqlalchemy.NullPool)
    rows: list[Any] = []
    try:
        with engine.begin() as connection:
            for statement in statements:
                result = connection.exec_driver_sql(statement)
                rows = list(result.fetchall()) if result.returns_rows else []
    finally:
        engine.dispose()
    return rows


def drop_table(url: str, table: str) -> None:
    execute(url, f"DROP TABLE IF EXISTS {table}")


def database_url(name: str, tmp_path: Path) -> str:
    """The URL of `name` (postgres, mysql, sqlite); skips when the server is down."""
    if name == "sqlite":
        return f"sqlite://{tmp_path / 'queue.db'}"
    return require_broker(name)


@pytest.fixture(params=DATABASES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(url, table) on each database, the table dropped afterwards."""
    marks = {"postgres": "postgres", "mysql": "mysql"}
    if request.param in marks:
        request.applymarker(getattr(pytest.mark, marks[request.param]))
    url = database_url(request.param, tmp_path)
    table = unique_table()
    yield url, table
    drop_table(url, table)


def config(url: str, table: str, **options: Any) -> dict[str, Any]:
    return {"sqlx": {"url": url, "table": table, "auto_create_table": True, **options}}


def receive_all(source: InputEndpoint, count: int, timeout: float = 15.0) -> list[Batch]:
    batches: list[Batch] = []
    deadline = time.monotonic() + timeout
    while sum(map(len, batches)) < count and time.monotonic() < deadline:
        batch = source.receive(count - sum(map(len, batches)), 0.2)
        if batch:
            batches.append(batch)
    return batches


def payloads(batches: list[Batch]) -> list[bytes]:
    return [m.payload for b in batches for m in b.messages]


# -- round trip -----------------------------------------------------------------------------


def test_payload_metadata_and_id_survive_the_table(db):
    url, table = db
    sent = [Message(f"m{i}".encode(), {"n": str(i), "ü": "ß"}) for i in range(3)]
    sent.append(Message(b"\x00\xff binary", None, 12345))
    output = open_output(config(url, table))
    output.send(sent)
    source = open_input(config(url, table))
    got = [m for b in receive_all(source, 4) for m in b.messages]
    assert [(m.id, m.payload, m.metadata) for m in got] == [
        (m.id, m.payload, m.metadata) for m in sent
    ]
    source.close()
    output.close()


def test_ack_deletes_with_delete_after_read_and_marks_processed_without(db):
    url, table = db
    output = open_output(config(url, table))
    output.send([Message(b"a"), Message(b"b")])
    keeper = open_input(config(url, table))
    (batch,) = receive_all(keeper, 1, 5.0)[:1] or [Batch([])]
    assert payloads([batch]) == [b"a"] or payloads([batch]) == [b"a", b"b"]
    keeper.ack(batch)
    keeper.close()
    # marked processed: still in the table, never handed out again
    rows = execute(url, f"SELECT payload, locked_until FROM {table} ORDER BY id")
    assert len(rows) == 2
    deleter = open_input(config(url, table, delete_after_read=True))
    rest = receive_all(deleter, 2 - len(batch), 5.0)
    assert payloads(rest) == [b"a", b"b"][len(batch) :]
    for b in rest:
        deleter.ack(b)
    assert not deleter.receive(10, 0.1)
    deleter.close()
    left = execute(url, f"SELECT payload FROM {table} ORDER BY id")
    assert [bytes(r[0]) for r in left] == [b"a", b"b"][: len(batch)]
    output.close()


@pytest.mark.parametrize("delete_after_read", [False, True])  # True: held claims on PostgreSQL
def test_nack_and_close_make_rows_ready_again_at_once(db, delete_after_read):
    url, table = db
    output = open_output(config(url, table))
    output.send([Message(b"a"), Message(b"b"), Message(b"c")])
    source = open_input(config(url, table, lease_ms=600_000, delete_after_read=delete_after_read))
    first = source.receive(2, 5.0)
    assert payloads([first]) == [b"a", b"b"]
    source.nack(first)
    again = source.receive(3, 5.0)
    assert payloads([again]) == [b"a", b"b", b"c"]
    source.close()  # unacked: handed back, not left leased for ten minutes
    other = open_input(config(url, table))
    assert payloads(receive_all(other, 3, 5.0)) == [b"a", b"b", b"c"]
    other.close()
    output.close()


def test_a_dead_consumers_rows_come_back_when_the_lease_ends(db):
    url, table = db
    output = open_output(config(url, table))
    output.send([Message(b"a"), Message(b"b")])
    leased = config(url, table, lease_ms=1500)
    dead = open_input(leased)
    assert payloads([dead.receive(2, 5.0)]) == [b"a", b"b"]
    # `dead` never acks nor closes (as a killed process would not)
    survivor = open_input(leased)
    assert not survivor.receive(2, 0.3)  # still leased
    assert payloads(receive_all(survivor, 2, 10.0)) == [b"a", b"b"]
    survivor.close()
    output.close()


def test_two_consumers_never_take_the_same_row(db):
    """Two inputs claim concurrently from one table: every row is taken exactly once."""
    url, table = db
    count = 600
    output = open_output(config(url, table))
    output.send([Message(str(i).encode()) for i in range(count)])
    cfg = config(url, table, delete_after_read=True, polling_interval_ms=5)
    taken: list[list[bytes]] = [[], []]
    errors: list[BaseException] = []

    def consume(slot: int) -> None:
        source = open_input(cfg)
        try:
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 1.5:
                batch = source.receive(7, 0.1)
                if batch:
                    taken[slot].extend(m.payload for m in batch.messages)
                    source.ack(batch)
                    idle_since = time.monotonic()
        except BaseException as error:
            errors.append(error)
        finally:
            source.close()

    threads = [threading.Thread(target=consume, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    everything = taken[0] + taken[1]
    assert sorted(everything, key=int) == [str(i).encode() for i in range(count)]
    assert len(set(everything)) == count  # nobody took a row twice
    output.close()


@pytest.mark.parametrize("delete_after_read", [False, True])  # True: held claims on PostgreSQL
def test_a_claimed_row_is_not_claimed_by_another_consumer(db, delete_after_read):
    url, table = db
    output = open_output(config(url, table))
    output.send([Message(b"a"), Message(b"b"), Message(b"c")])
    cfg = config(url, table, delete_after_read=delete_after_read)
    first, second = open_input(cfg), open_input(cfg)
    held = first.receive(5, 5.0)
    assert payloads([held]) == [b"a", b"b", b"c"]
    output.send([Message(b"d")])
    assert payloads([second.receive(5, 5.0)]) == [b"d"]
    assert not second.receive(5, 0.2)  # a, b, c stay with `first` until it settles them
    first.nack(held)
    assert payloads([second.receive(5, 5.0)]) == [b"a", b"b", b"c"]
    first.close()
    second.close()
    output.close()


def test_a_full_batch_claims_the_next_one_ahead_and_nack_gives_both_back(db):
    """On a server, a full batch starts the next claim at once (one batch ahead, leased to
    the same consumer); a nack gives that back too, so the nacked rows still come first."""
    url, table = db
    output = open_output(config(url, table))
    output.send([Message(str(i).encode()) for i in range(6)])
    source = open_input(config(url, table))
    first = source.receive(2, 5.0)
    assert payloads([first]) == [b"0", b"1"]
    assert payloads([source.receive(2, 5.0)]) == [b"2", b"3"]
    assert source.status().pending == 2  # 4, 5: claimed ahead, still to come from here
    source.nack(first)  # 4, 5 (claimed ahead after the second full batch) come back too
    again = receive_all(source, 4)
    assert payloads(again) == [b"0", b"1", b"4", b"5"]  # 2, 3: still handed out
    source.close()
    output.close()


def test_held_claims_ack_nack_and_claim_ahead_with_delete_after_read(db):
    """delete_after_read (held claims on PostgreSQL): a full batch claims the next ahead;
    a smaller receive never splits a claim; ack deletes exactly the batch's rows; a nack
    gives back the batch and the one claimed ahead, in id order."""
    url, table = db
    output = open_output(config(url, table))
    output.send([Message(str(i).encode()) for i in range(8)])
    source = open_input(config(url, table, delete_after_read=True))
    first = source.receive(2, 5.0)
    assert payloads([first]) == [b"0", b"1"]  # full: 2, 3 claimed ahead
    smaller = source.receive(1, 5.0)
    assert payloads([smaller]) == [b"2"]  # the claim ahead was given back, not split
    source.ack(first)
    (remaining,) = execute(url, f"SELECT COUNT(*) FROM {table}")[0]
    assert remaining == 6
    source.nack(smaller)
    again = receive_all(source, 6)
    assert payloads(again) == [str(i).encode() for i in range(2, 8)]
    for batch in again:
        source.ack(batch)
    assert execute(url, f"SELECT COUNT(*) FROM {table}")[0][0] == 0
    source.close()
    output.close()


def test_reads_a_table_with_only_the_peer_columns(db):
    """A table as mq-bridge creates it (no message_id, no metadata): payload only, stable ids."""
    url, table = db
    from mq_bridge.endpoints.sqlx.dialects import dialect_for

    kind = {"postgres": "postgresql", "mysql": "mysql", "sqlite": "sqlite"}[_name_of(url)]
    ddl = dialect_for(kind, (table,)).create_table()[0]
    execute(url, ddl.replace(", message_id CHAR(32), metadata JSONB", "")
            .replace(", message_id CHAR(32), metadata LONGTEXT", "")
            .replace(", message_id TEXT, metadata TEXT", ""))  # fmt: skip
    plain = {"sqlx": {"url": url, "table": table}}
    output = open_output(plain)
    output.send([Message(b"one", {"dropped": "yes"}), Message(b"two")])
    source = open_input(plain)
    first = [m for b in receive_all(source, 2) for m in b.messages]
    assert [(m.payload, m.metadata) for m in first] == [(b"one", {}), (b"two", {})]
    source.close()  # not acked: handed back
    source.connect()
    again = [m for b in receive_all(source, 2) for m in b.messages]
    assert [m.id for m in again] == [m.id for m in first]  # stable: from table + row id
    source.close()
    output.close()


def _name_of(url: str) -> str:
    return "postgres" if url.startswith("postgres") else url.split(":")[0]


def test_send_batch_is_committed_when_it_returns(db):
    """Another connection sees every row the moment send() has returned."""
    url, table = db
    with Publisher.from_config(config(url, table)) as publisher:
        publisher.send_batch([f"r{i}".encode() for i in range(1234)])
        (count,) = execute(url, f"SELECT COUNT(*) FROM {table}")[0]
        assert count == 1234
        publisher.send_json({"one": 1})
        (count,) = execute(url, f"SELECT COUNT(*) FROM {table}")[0]
        assert count == 1235


def test_consumer_poll_and_status_pending(db):
    url, table = db
    with Publisher.from_config(config(url, table)) as publisher:
        publisher.send_batch([b"a", b"b", b"c"])
        with Consumer.from_config(config(url, table, delete_after_read=True)) as consumer:
            assert consumer.status()["pending"] == 3
            assert [m.payload for m in consumer.poll(max=5, timeout_ms=5000)] == [b"a", b"b", b"c"]
            assert consumer.status()["pending"] == 0  # claimed: not ready for others
            consumer.commit()
            publisher.send_batch([b"d", b"e"])
            assert consumer.status()["pending"] == 2
            assert [m.payload for m in consumer.poll(max=5, timeout_ms=5000)] == [b"d", b"e"]
            consumer.commit()
            assert consumer.status()["pending"] == 0


def test_custom_insert_query(db):
    url, table = db
    execute(url, *_peer_style(url, table))
    custom = {"sqlx": {"url": url, "table": table,
                       "insert_query": f"INSERT INTO {table} (payload) VALUES (?)"}}  # fmt: skip
    with Publisher.from_config(custom) as publisher:
        publisher.send_batch([b"x", b"y"])
        publisher.send(b"z")
    rows = execute(url, f"SELECT payload FROM {table} ORDER BY id")
    assert [bytes(r[0]) for r in rows] == [b"x", b"y", b"z"]


def _peer_style(url: str, table: str) -> list[str]:
    from mq_bridge.endpoints.sqlx.dialects import dialect_for

    kind = {"postgres": "postgresql", "mysql": "mysql", "sqlite": "sqlite"}[_name_of(url)]
    return dialect_for(kind, (table,)).create_table()


def test_custom_select_query(db):
    url, table = db
    execute(url, *_peer_style(url, table))
    with Publisher.from_config(config(url, table)) as publisher:
        publisher.send_batch([b"keep", b"skip", b"keep2"])
    query = (
        f"SELECT id, payload FROM {table} WHERE payload <> {_literal(url, 'skip')} "
        "AND locked_until IS NULL ORDER BY id LIMIT $1"
    )
    cfg = {"sqlx": {"url": url, "table": table, "select_query": query, "delete_after_read": True}}
    with Consumer.from_config(cfg) as consumer:
        got = consumer.poll(max=10, timeout_ms=5000)
        assert [m.payload for m in got] == [b"keep", b"keep2"]
        consumer.commit()
    rows = execute(url, f"SELECT payload FROM {table}")
    assert [bytes(r[0]) for r in rows] == [b"skip"]


def _literal(url: str, text: str) -> str:
    if url.startswith("postgres"):
        return f"'{text}'::bytea"
    if url.startswith("sqlite"):
        return f"X'{text.encode().hex()}'"
    return f"'{text}'"


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "path", "text"),
    [
        ({"url": "mssql://h/db", "table": "t"}, "url", "scheme"),
        ({"url": "http://h/db", "table": "t"}, "url", "scheme"),
        ({"url": "postgres://h/db", "table": "t; DROP TABLE x"}, "table", "not a table name"),
        ({"url": "postgres://h/db", "table": "a.b.c"}, "table", "not a table name"),
        ({"url": "postgres://h/db", "table": 't"x'}, "table", "not a table name"),
        ({"url": "postgres://h/db", "table": "t", "min_connections": 20}, "min_connections", "max"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(options, path, text):
    with pytest.raises(ConfigError, match=text) as caught:
        Publisher.from_config({"sqlx": options})
    assert path in str(caught.value)


def test_a_server_that_is_not_there_fails_start_quickly():
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError):
        Publisher.from_config({"sqlx": {"url": "postgres://postgres@127.0.0.1:1/x", "table": "t"}})
    with pytest.raises(EndpointUnavailableError):
        Publisher.from_config({"sqlx": {"url": "mysql://root@127.0.0.1:1/x", "table": "t"}})
    assert time.monotonic() - started < 30


@pytest.mark.postgres
def test_a_missing_table_or_database_is_a_config_error(postgres_url):
    with pytest.raises(ConfigError, match="does not exist"):
        Publisher.from_config({"sqlx": {"url": postgres_url, "table": unique_table()}})
    with pytest.raises(ConfigError, match="does not exist"):
        Consumer.from_config(
            {"sqlx": {"url": postgres_url.rsplit("/", 1)[0] + "/nodb_x", "table": "t"}}
        )


def test_sqlite_missing_table_and_a_table_that_is_not_a_queue(tmp_path):
    url = f"sqlite://{tmp_path / 'q.db'}"
    with pytest.raises(ConfigError, match="does not exist"):
        Consumer.from_config({"sqlx": {"url": url, "table": "nothing"}})
    execute(url, "CREATE TABLE plain (id INTEGER PRIMARY KEY, payload BLOB)")
    with pytest.raises(ConfigError, match="locked_until"):
        Consumer.from_config({"sqlx": {"url": url, "table": "plain"}})
    with Publisher.from_config({"sqlx": {"url": url, "table": "plain"}}) as publisher:
        publisher.send(b"ok")  # writing needs only `payload`
    assert execute(url, "SELECT payload FROM plain") == [(b"ok",)]


def test_table_names_are_quoted_reserved_words_work(tmp_path):
    url = f"sqlite://{tmp_path / 'q.db'}"
    cfg = config(url, "order")  # a reserved word: only works quoted
    with Publisher.from_config(cfg) as publisher:
        publisher.send(b"x")
    with Consumer.from_config(cfg) as consumer:
        assert [m.payload for m in consumer.poll(max=1, timeout_ms=5000)] == [b"x"]
        consumer.commit()


def test_sqlite_url_forms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for url in ("sqlite://rel.db", "sqlite:rel2.db", f"sqlite://{tmp_path}/abs.db?mode=rwc"):
        with Publisher.from_config(config(url, "q")) as publisher:
            publisher.send(b"x")
    assert {p.name for p in tmp_path.iterdir()} >= {"rel.db", "rel2.db", "abs.db"}
    memory = config("sqlite::memory:", "q")
    with Publisher.from_config(memory) as publisher, Consumer.from_config(memory) as consumer:
        publisher.send(b"in memory")
        assert [m.payload for m in consumer.poll(max=1, timeout_ms=5000)] == [b"in memory"]


def test_metadata_written_as_json_and_source_metadata(tmp_path):
    url = f"sqlite://{tmp_path / 'q.db'}"
    with Publisher.from_config(config(url, "q")) as publisher:
        publisher.send(Message(b"x", {"kind": "k", "mqb.src.forged": "no"}))
    (text,) = execute(url, "SELECT metadata FROM q")[0]
    assert json.loads(text) == {"kind": "k"}
    with Consumer.from_config(config(url, "q", source_metadata=True)) as consumer:
        (message,) = consumer.poll(max=1, timeout_ms=5000)
        assert message.metadata == {"kind": "k", "mqb.src.sqlx_table": "q", "mqb.src.sqlx_id": "1"}


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_batch_larger_than_one_statement_is_one_transaction(db):
    """3 MB in one send_batch: PyMySQL splits it into several INSERTs; all or nothing."""
    url, table = db
    big = [bytes([i]) * 100_000 for i in range(30)]
    with Publisher.from_config(config(url, table)) as publisher:
        publisher.send_batch(big)
    with Consumer.from_config(config(url, table, delete_after_read=True)) as consumer:
        got: list[bytes] = []
        while len(got) < 30:
            batch = consumer.poll(max=30, timeout_ms=5000)
            assert batch
            got += [m.payload for m in batch]
        consumer.commit()
    assert got == big


# -- listen_notify (PostgreSQL) -------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("delete_after_read", [False, True])
@pytest.mark.parametrize("batch", [1, 3])  # one INSERT ... pg_notify; a COPY, then NOTIFY
def test_listen_notify_wakes_a_waiting_input_long_before_its_poll(delete_after_read, batch):
    """With a 30 s polling interval, a row sent while the input waits arrives within the
    10 s bound only if the NOTIFY woke it (no timing threshold beyond that bound)."""
    url, table = require_broker("postgres"), unique_table()
    cfg = config(url, table, listen_notify=True, polling_interval_ms=30_000)
    output = open_output(cfg)
    source = open_input({"sqlx": {**cfg["sqlx"], "delete_after_read": delete_after_read}})
    try:
        assert not source.receive(5, 0.1)  # drained: it now waits on the 30 s poll
        got: list[Batch] = []
        # no timeout: without a wake-up it claims again only after the 30 s poll
        waiting = threading.Thread(target=lambda: got.append(source.receive(5, None)))
        waiting.start()
        time.sleep(1.0)  # let it claim (nothing) and wait
        output.send([Message(b"n%d" % i) for i in range(batch)])
        waiting.join(10)
        woken = not waiting.is_alive()
        source.interrupt()  # (only needed when it was not woken)
        waiting.join(40)
        assert woken, "the input was not woken by the NOTIFY"
        assert payloads(got) == [b"n%d" % i for i in range(batch)]
        source.ack(got[0])
    finally:
        source.close()
        output.close()
        drop_table(url, table)


def test_listen_notify_is_refused_off_postgresql(tmp_path):
    with pytest.raises(ConfigError, match="listen_notify"):
        open_input(config(f"sqlite://{tmp_path / 'q.db'}", "q", listen_notify=True))


@pytest.mark.postgres
def test_held_claims_never_wait_for_a_pool_connection():
    """A slot is an extra connection: with none free in the pool, the input claims by lease
    on its own connection at once instead of waiting acquire_timeout_ms (30 s) for one."""
    url, table = require_broker("postgres"), unique_table()
    output = open_output(config(url, table))
    output.send([Message(b"a"), Message(b"b")])
    source = open_input(config(url, table, delete_after_read=True, max_connections=1))
    try:
        batch = source.receive(5, 5.0)
        assert payloads([batch]) == [b"a", b"b"]
        source.ack(batch)
        assert execute(url, f"SELECT COUNT(*) FROM {table}")[0][0] == 0
    finally:
        source.close()
        output.close()
        drop_table(url, table)


@pytest.mark.postgres
def test_a_held_batch_acked_twice_never_ends_the_next_claim_on_its_connection():
    """The second ack of a batch finds its connection holding the next batch's claim: it
    must not COMMIT that one (its rows would be deleted before being handled)."""
    url, table = require_broker("postgres"), unique_table()
    output = open_output(config(url, table))
    source = open_input(config(url, table, delete_after_read=True))
    try:
        output.send([Message(b"a")])
        first = source.receive(5, 5.0)
        source.ack(first)
        output.send([Message(b"b")])
        second = source.receive(5, 5.0)  # on the connection `first` used
        assert payloads([second]) == [b"b"]
        source.ack(first)  # again: refused (logged), `second` untouched
        source.nack(second)
        assert payloads([source.receive(5, 5.0)]) == [b"b"]
    finally:
        source.close()
        output.close()
        drop_table(url, table)
