"""The pure parts of the `sqlx` endpoint: SQL text, placeholders, rows <-> messages, URLs."""

from __future__ import annotations

import sqlite3

import pytest

from mq_bridge import Message
from mq_bridge.endpoints.kit.wire import position_id
from mq_bridge.endpoints.sqlx.codec import RowDecoder, RowEncoder
from mq_bridge.endpoints.sqlx.dialects import (
    Layout,
    MysqlDialect,
    SqliteDialect,
    bind_placeholders,
    dialect_for,
)
from mq_bridge.endpoints.sqlx.options import SqlxOptions, database_kind, table_parts
from mq_bridge.endpoints.sqlx.urls import describe_url, engine_url
from mq_bridge.errors import ConfigError

OURS = Layout(frozenset({"id", "payload", "locked_until", "created_at", "message_id", "metadata"}))
PEERS = Layout(frozenset({"id", "payload", "locked_until", "created_at"}))


@pytest.mark.parametrize(
    ("query", "placeholder", "expected"),
    [
        ("INSERT INTO t (payload) VALUES (?)", "%s", ("INSERT INTO t (payload) VALUES (%s)", 1)),
        ("INSERT INTO t (payload) VALUES ($1)", "?", ("INSERT INTO t (payload) VALUES (?)", 1)),
        ("SELECT '?', \"$1\" WHERE a = $12", "%s", ("SELECT '?', \"$1\" WHERE a = %s", 1)),
        ("SELECT 100 % 7 LIMIT ?", "%s", ("SELECT 100 %% 7 LIMIT %s", 1)),
        ("SELECT 100 % 7 LIMIT ?", "?", ("SELECT 100 % 7 LIMIT ?", 1)),
        ("SELECT 1", "%s", ("SELECT 1", 0)),
    ],
)
def test_bind_placeholders(query, placeholder, expected):
    assert bind_placeholders(query, placeholder) == expected


@pytest.mark.parametrize("name", ["t", "jobs_2", "public.jobs", "Orders"])
def test_table_names_that_are_accepted(name):
    assert ".".join(table_parts(name)) == name


@pytest.mark.parametrize("name", ["", "a.b.c", "t;drop", "t x", 'a"b', "a`b", ".t", "t.", "é"])
def test_table_names_that_are_refused(name):
    with pytest.raises(ValueError, match="not a table name"):
        table_parts(name)


def test_names_are_quoted_per_database():
    assert dialect_for("postgresql", ("Public", "Jobs")).table == '"public"."jobs"'
    assert dialect_for("mysql", ("Jobs",)).table == "`Jobs`"
    assert dialect_for("sqlite", ("order",)).table == '"order"'


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "mysql", "mariadb", "sqlite"])
def test_url_schemes_of_the_peer(scheme):
    assert database_kind(f"{scheme}://x/y") in ("postgresql", "mysql", "sqlite")


def test_options_defaults_and_nulls_are_the_peers():
    options = SqlxOptions.model_validate(
        {"url": "postgres://h/d", "table": "t", "polling_interval_ms": None, "shared": None}
    )
    assert options.polling_interval == 0.1
    assert options.max_connections == 10 and options.min_connections == 0
    assert options.acquire_timeout_ms == 30_000 and options.idle_timeout_ms == 600_000
    assert options.max_lifetime_ms == 1_800_000 and options.shared is True
    assert options.lease_seconds == 60.0 and options.delete_after_read is False


def test_insert_columns_follow_the_table_layout():
    sqlite = dialect_for("sqlite", ("q",))
    assert (
        sqlite.insert(OURS)
        == 'INSERT INTO "q" ("payload", "message_id", "metadata") VALUES (?, ?, ?)'
    )
    assert sqlite.insert(PEERS) == 'INSERT INTO "q" ("payload") VALUES (?)'


def test_mysql_hex_inserts_need_no_escaping_and_split_at_the_limit():
    mysql = MysqlDialect(("q",))
    rows = [(b"it's \\ \x00", "ab" * 16, '{"k":"\'"}'), (b"x", "cd" * 16, None)]
    (statement,) = mysql.insert_statements(OURS, rows)
    assert "'it" not in statement and "\\" not in statement
    assert statement.endswith(f"(X'78',X'{('cd' * 16).encode().hex()}',NULL)")
    several = mysql.insert_statements(OURS, rows * 50, limit=400)
    assert len(several) > 1 and sum(s.count("),(") + 1 for s in several) == 100


def test_postgres_binary_copy_only_for_known_column_types_and_its_format():
    postgres = dialect_for("postgresql", ("q",))
    typed = Layout(OURS.columns, {"payload": 17, "message_id": 1042, "metadata": 3802})
    assert postgres.binary_copy(typed) == (
        'COPY "q" ("payload", "message_id", "metadata") FROM STDIN (FORMAT BINARY)'
    )
    assert postgres.binary_copy(OURS) is None  # types unknown: the text COPY
    assert postgres.binary_copy(Layout(OURS.columns, {**typed.types, "metadata": 17})) is None
    data = postgres.binary_copy_data(
        typed, [(b"\x00p", "ab" * 16, '{"k":"v"}'), (b"", "cd" * 16, None)]
    )
    header, trailer = b"PGCOPY\n\xff\r\n\x00" + bytes(8), b"\xff\xff"
    first = b"\x00\x03" + b"\x00\x00\x00\x02\x00p" + b"\x00\x00\x00\x20" + b"ab" * 16
    first += b"\x00\x00\x00\x0a\x01" + b'{"k":"v"}'  # jsonb: version 1, then the text
    second = b"\x00\x03" + bytes(4) + b"\x00\x00\x00\x20" + b"cd" * 16 + b"\xff" * 4
    assert data == header + first + second + trailer


def test_sqlite_claim_takes_the_lowest_ready_ids_and_leases_them():
    """The SQLite claim statement itself, on an in-memory database."""
    sqlite = SqliteDialect(("q",))
    connection = sqlite3.connect(":memory:")
    for statement in sqlite.create_table():
        connection.execute(statement)
    connection.executemany(
        "INSERT INTO q (payload, locked_until) VALUES (?, ?)",
        [(b"a", None), (b"b", "9999-12-31 23:59:59"), (b"c", "2000-01-01 00:00:00"), (b"d", None)],
    )
    rows = connection.execute(sqlite.claim(OURS), ("+60.000 seconds", 2)).fetchall()
    assert sorted(row[1] for row in rows) == [b"a", b"c"]  # b is processed, c's lease ended
    again = connection.execute(sqlite.claim(OURS), ("+60.000 seconds", 5)).fetchall()
    assert [row[1] for row in again] == [b"d"]


def test_rows_round_trip_through_encoder_and_decoder():
    sent = [
        Message(b"a", {"k": "v", "mqb.src.x": "dropped"}, 7),
        Message(b"b", {"k": "v"}),
        Message(b"c"),
    ]
    rows = RowEncoder(True, True).rows(sent)
    assert rows[0][2] == '{"k":"v"}' and rows[2][2] is None
    decoder = RowDecoder("q", True, True)
    got = decoder.messages([(i + 1, *row) for i, row in enumerate(rows)], source=False)
    assert [(m.id, m.payload, m.metadata) for m in got] == [
        (m.id, m.payload, {"k": "v"} if m.metadata else {}) for m in sent
    ]
    assert got[0].metadata_view is got[1].metadata_view  # equal metadata, one dict


def test_rows_of_other_writers_get_stable_ids_and_text_payloads():
    decoder = RowDecoder("q", False, False)
    (message,) = decoder.messages([(41, "text payload")], source=True)
    assert message.payload == b"text payload"
    assert message.id_int == position_id("sqlx", "q", 41)
    assert message.metadata == {"mqb.src.sqlx_table": "q", "mqb.src.sqlx_id": "41"}
    for row_id in (0, 1, 9, 10, 123_456_789_012, 2**63 - 1):
        (row,) = RowDecoder("public.jobs_2", False, False).messages([(row_id, b"")], False)
        assert row.id_int == position_id("sqlx", "public.jobs_2", row_id)
    garbled = RowDecoder("q", True, True).messages([(1, b"x", "not-an-id", "[1]")], False)
    assert garbled[0].metadata == {} and garbled[0].id is not None


def test_sqlite_urls_as_sqlx_reads_them(tmp_path):
    def database(url: str) -> str:
        sa_url, _, memory = engine_url(SqlxOptions.model_validate({"url": url, "table": "t"}))
        return ":memory:" if memory else str(sa_url.database)

    assert database("sqlite://data.db") == "data.db"
    assert database("sqlite:data.db") == "data.db"
    assert database("sqlite:///var/data.db") == "/var/data.db"
    assert database("sqlite::memory:") == ":memory:"
    assert database("sqlite://:memory:") == ":memory:"
    assert database("sqlite:///var/data.db?mode=ro") == "file:/var/data.db"
    with pytest.raises(ConfigError, match="not supported"):
        database("sqlite://x.db?journal=wal")


def test_mysql_url_parameters():
    def arguments(url: str) -> dict:
        return engine_url(SqlxOptions.model_validate({"url": url, "table": "t"}))[1]

    assert "ssl" not in arguments("mysql://root@h/db")
    assert arguments("mysql://root@h/db?ssl-mode=REQUIRED")["ssl"].check_hostname is False
    assert arguments("mariadb://root@h/db?charset=utf8mb4")["charset"] == "utf8mb4"
    with pytest.raises(ConfigError, match="not supported"):
        arguments("mysql://root@h/db?foo=1")


def test_credentials_options_override_the_url_and_are_not_described():
    options = SqlxOptions.model_validate(
        {"url": "postgres://u:old@h:5433/d", "table": "t", "password": "new", "username": "v"}
    )
    url, _, _ = engine_url(options)
    assert (url.username, url.password, url.port) == ("v", "new", 5433)
    assert describe_url(options.url) == "postgres://h:5433/d"
