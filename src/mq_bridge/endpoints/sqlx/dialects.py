"""The SQL the `sqlx` endpoint runs, per database: pure text, no I/O.

The queue table (mq-bridge's layout, plus two nullable columns of ours)::

    id            integer key, ascending with inserts    (BIGSERIAL / AUTO_INCREMENT / ROWID)
    payload       the message body                       (BYTEA / LONGBLOB / BLOB)
    locked_until  NULL: ready; a time in the future: claimed by a consumer until then;
                  the far future (`processed`): acknowledged, kept (delete_after_read off)
    created_at    when the row was inserted
    message_id    32 hex digits, the message id          (ours; NULL from other writers)
    metadata      the metadata as a JSON object          (ours; NULL when there is none)

A row is *ready* when ``locked_until`` is NULL or in the past. Claiming a batch is one
transaction that picks the lowest ready ids and sets their ``locked_until`` to now + lease:

    PostgreSQL     one statement: WITH (SELECT ... FOR UPDATE SKIP LOCKED) UPDATE ... RETURNING
    MariaDB/MySQL  SELECT ... FOR UPDATE SKIP LOCKED, then UPDATE ... WHERE id IN (...)
                   (plain FOR UPDATE on servers without SKIP LOCKED: safe, but waits)
    SQLite         one statement: UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING
                   (SQLite runs one writer at a time: the statement is the lock)

so two consumers never claim one row, and a row whose consumer died is ready again when its
lease runs out. ack = DELETE (delete_after_read) or ``locked_until = processed``; nack =
``locked_until = NULL`` (ready at once, in id order). This is mq-bridge's protocol, so its
consumers and ours can share a table. Table names are validated (`options.table_parts`) and
always quoted here; every value is a bound parameter.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLAIM_COLUMNS", "Dialect", "Layout", "bind_placeholders", "dialect_for"]

#: The columns a claim returns, in this order, when the table has them.
CLAIM_COLUMNS = ("id", "payload", "message_id", "metadata")


@dataclass(frozen=True)
class Layout:
    """Which of the queue table's columns a table has (found at connect)."""

    columns: frozenset[str]
    #: column -> the driver's type code (PostgreSQL: the type's OID), where known
    types: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_queue(self) -> bool:
        """Has what claiming needs: `id`, `payload` and `locked_until`."""
        return {"id", "payload", "locked_until"} <= self.columns

    @property
    def message_id(self) -> bool:
        return "message_id" in self.columns

    @property
    def metadata(self) -> bool:
        return "metadata" in self.columns


def bind_placeholders(query: str, placeholder: str) -> tuple[str, int]:
    """`query` with each ``?`` and ``$N`` outside quotes replaced by `placeholder`, and how
    many there were. With ``%s`` placeholders (psycopg, PyMySQL) a literal ``%`` is doubled.

    >>> bind_placeholders("INSERT INTO t (payload, note) VALUES ($1, 'why?')", "%s")
    ("INSERT INTO t (payload, note) VALUES (%s, 'why?')", 1)
    """
    out: list[str] = []
    count, quote, i = 0, "", 0
    while i < len(query):
        char = query[i]
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char == "?" or (char == "$" and query[i + 1 : i + 2].isdigit()):
            out.append(placeholder)
            count += 1
            i += 1
            while char == "$" and i < len(query) and query[i].isdigit():
                i += 1
            continue
        out.append("%%" if char == "%" and placeholder == "%s" else char)
        i += 1
    return "".join(out), count


class Dialect:
    """The SQL of one database for one table (see the module docstring)."""

    name = ""
    placeholder = "%s"
    #: SQL for "now", comparable with `locked_until`
    now = "NOW()"
    #: the value `locked_until` takes when a row was processed (acked, not deleted)
    processed = "'9999-12-31 23:59:59'"
    #: the most ids in one ``IN (...)`` list (SQLite's older versions allow 999 parameters)
    max_ids = 1000

    def __init__(self, table: Sequence[str]) -> None:
        self.table = ".".join(self.quote(part) for part in table)
        self.index = self.quote(f"idx_{table[-1]}_locked_until")
        self.index_table = table

    def quote(self, name: str) -> str:
        return f'"{name}"'

    # -- schema ---------------------------------------------------------------------------

    def create_table(self) -> list[str]:
        raise NotImplementedError

    def describe(self) -> str:
        """A query that returns no row, whose cursor describes the table's columns."""
        return f"SELECT * FROM {self.table} WHERE 1 = 0"

    # -- output ---------------------------------------------------------------------------

    def insert(self, layout: Layout, rows: int = 1) -> str:
        """INSERT of `rows` rows: payload, then message_id and metadata where the table
        has them."""
        columns = self.inserted(layout)
        values = "(" + ", ".join([self.placeholder] * len(columns)) + ")"
        names = ", ".join(columns)
        return f"INSERT INTO {self.table} ({names}) VALUES " + ", ".join([values] * rows)

    def inserted(self, layout: Layout) -> list[str]:
        """The (quoted) columns a row of ours fills."""
        columns = ["payload"]
        columns += ["message_id"] if layout.message_id else []
        columns += ["metadata"] if layout.metadata else []
        return [self.quote(column) for column in columns]

    # -- input ----------------------------------------------------------------------------

    def selected(self, layout: Layout, alias: str = "") -> str:
        prefix = f"{alias}." if alias else ""
        columns = [f"{prefix}id", f"{prefix}payload"]
        columns += [f"{prefix}message_id"] if layout.message_id else []
        columns += [self.metadata_column(prefix)] if layout.metadata else []
        return ", ".join(columns)

    def metadata_column(self, prefix: str) -> str:
        return f"{prefix}metadata"

    def ready(self) -> str:
        return f"(locked_until IS NULL OR locked_until < {self.now})"

    def pending(self) -> str:
        return f"SELECT COUNT(*) FROM {self.table} WHERE {self.ready()}"

    def where_ids(self, count: int) -> str:
        """``id IN (...)`` for `count` ids, bound as `id_parameters` gives them."""
        return "id IN (" + ", ".join([self.placeholder] * count) + ")"

    def id_parameters(self, ids: Sequence[int]) -> tuple[object, ...]:
        return tuple(ids)

    def delete(self, count: int) -> str:
        return f"DELETE FROM {self.table} WHERE {self.where_ids(count)}"

    def mark_processed(self, count: int) -> str:
        return (
            f"UPDATE {self.table} SET locked_until = {self.processed} WHERE {self.where_ids(count)}"
        )

    def release(self, count: int) -> str:
        return f"UPDATE {self.table} SET locked_until = NULL WHERE {self.where_ids(count)}"


class PostgresDialect(Dialect):
    name = "postgresql"
    max_ids = 100_000  # one array parameter

    def quote(self, name: str) -> str:
        # PostgreSQL folds unquoted names to lower case; the peer writes them unquoted, so
        # the quoted lower-case name is the table it made.
        return f'"{name.lower()}"'

    def create_table(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table} (id BIGSERIAL PRIMARY KEY, "
            "payload BYTEA NOT NULL, locked_until TIMESTAMPTZ, "
            "created_at TIMESTAMPTZ DEFAULT NOW(), message_id CHAR(32), metadata JSONB)",
            f"CREATE INDEX IF NOT EXISTS {self.index} ON {self.table} (locked_until)",
        ]

    def copy(self, layout: Layout) -> str:
        """COPY of the INSERT's columns: a batch in one statement, far cheaper than a
        multi-row INSERT (whose long text psycopg would parse on every call)."""
        return f"COPY {self.table} ({', '.join(self.inserted(layout))}) FROM STDIN"

    def binary_copy(self, layout: Layout) -> str | None:
        """COPY in the binary format, when every inserted column's type is one
        `binary_copy_data` writes (bytea payload; text or JSON message_id and metadata):
        no hex text for the payload on either side. None otherwise (use `copy`)."""
        types = layout.types
        if types.get("payload") != _BYTEA:
            return None
        for column in ("message_id", "metadata"):
            if column in layout.columns and types.get(column) not in _BINARY_TEXT:
                return None
        columns = ", ".join(self.inserted(layout))
        return f"COPY {self.table} ({columns}) FROM STDIN (FORMAT BINARY)"

    def binary_copy_data(self, layout: Layout, rows: Sequence[tuple[Any, ...]]) -> bytes:
        """`rows` (as `codec.RowEncoder` makes them) in COPY's binary format::

        header   PGCOPY LF 0xff CR LF NUL (11 bytes), flags (int32 0), extension length (int32 0)
        a row    field count (int16), then per field: length (int32; -1 = NULL) and
                 the bytes (bytea: as is; text: UTF-8; jsonb: version byte 1 + text)
        trailer  -1 (int16)
        """
        width = len(rows[0]) if rows else 1
        jsonb = layout.metadata and layout.types.get("metadata") == _JSONB
        parts: list[bytes] = [_COPY_HEADER]
        append, extend = parts.append, parts.extend
        start, length = _ROW_START.pack, _INT32.pack  # start: field count, payload length
        for row in rows:
            payload = row[0]
            extend((start(width, len(payload)), payload))
            for index in range(1, width):
                value = row[index]
                if value is None:
                    append(_NULL)
                    continue
                data = value.encode()
                if jsonb and index == width - 1:
                    data = b"\x01" + data
                append(length(len(data)))
                append(data)
        append(b"\xff\xff")
        return b"".join(parts)

    def metadata_column(self, prefix: str) -> str:
        return f"{prefix}metadata::text"  # text, not psycopg's parsed JSON: cached by us

    def claim(self, layout: Layout) -> str:
        """Parameters: (limit, lease in milliseconds). Rows come back in no set order."""
        return (
            f"WITH available AS (SELECT id FROM {self.table} WHERE {self.ready()} "
            "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) "
            f"UPDATE {self.table} AS q SET locked_until = NOW() + %s * INTERVAL '1 millisecond' "
            f"FROM available WHERE q.id = available.id RETURNING {self.selected(layout, 'q')}"
        )

    def claim_by_delete(self, layout: Layout) -> str:
        """The claim of `held` (delete_after_read): DELETE the lowest ready rows, kept in
        the caller's open transaction until the ack. ``{limit}`` is filled in (an int)."""
        return (
            f"DELETE FROM {self.table} WHERE id IN (SELECT id FROM {self.table} "
            f"WHERE {self.ready()} ORDER BY id LIMIT {{limit}} FOR UPDATE SKIP LOCKED) "
            f"RETURNING {self.selected(layout)}"
        )

    def where_ids(self, count: int) -> str:
        return "id = ANY(%s::bigint[])"  # one array parameter, any length

    def id_parameters(self, ids: Sequence[int]) -> tuple[object, ...]:
        return (list(ids),)


_BYTEA, _JSONB = 17, 3802
#: types whose binary COPY format is their UTF-8 text: text, varchar, bpchar (CHAR(n)), json
_BINARY_TEXT = frozenset({25, 1043, 1042, 114, _JSONB})
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_ROW_START = struct.Struct("!hi")
_INT32 = struct.Struct("!i")
_NULL = _INT32.pack(-1)


class MysqlDialect(Dialect):
    name = "mysql"
    now = "NOW(6)"

    def quote(self, name: str) -> str:
        return f"`{name}`"

    def create_table(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
            "payload LONGBLOB NOT NULL, locked_until DATETIME(6), "
            "created_at DATETIME DEFAULT CURRENT_TIMESTAMP, message_id CHAR(32), "
            "metadata LONGTEXT)",
            # MariaDB has IF NOT EXISTS here; MySQL answers 1061 (duplicate key name).
            f"CREATE INDEX IF NOT EXISTS {self.index} ON {self.table} (locked_until)",
        ]

    def insert_statements(
        self, layout: Layout, rows: Sequence[tuple[Any, ...]], limit: int = 1_000_000
    ) -> list[str]:
        """Multi-row INSERTs of `rows` (as `codec.RowEncoder` makes them), each under `limit`
        characters. Every value is a hex literal (``X'…'``, which MySQL stores as the
        column's type): no escaping, whatever the server's sql_mode. (PyMySQL's own
        executemany escapes each value in Python: ~5 µs a row more.)"""
        head = f"INSERT INTO {self.table} ({', '.join(self.inserted(layout))}) VALUES "
        statements: list[str] = []
        values: list[str] = []
        size = len(head)
        cached: dict[str, str] = {}  # metadata texts repeat: their literals are kept
        for row in rows:
            literals = [f"X'{row[0].hex()}'"]
            for value in row[1:]:
                if value is None:
                    literals.append("NULL")
                    continue
                literal = cached.get(value)
                if literal is None:
                    literal = f"X'{value.encode().hex()}'"
                    if len(cached) < 64:
                        cached[value] = literal
                literals.append(literal)
            text = "(" + ",".join(literals) + ")"
            if values and size + len(text) + 1 > limit:
                statements.append(head + ",".join(values))
                values, size = [], len(head)
            values.append(text)
            size += len(text) + 1
        if values:
            statements.append(head + ",".join(values))
        return statements

    def select_for_claim(self, layout: Layout, skip_locked: bool) -> str:
        """Parameters: (limit,). Locks the rows until the transaction ends."""
        lock = "FOR UPDATE SKIP LOCKED" if skip_locked else "FOR UPDATE"
        return (
            f"SELECT {self.selected(layout)} FROM {self.table} WHERE {self.ready()} "
            f"ORDER BY id LIMIT %s {lock}"
        )

    def lease(self, count: int) -> str:
        """Parameters: (lease in microseconds, *ids)."""
        return (
            f"UPDATE {self.table} SET locked_until = NOW(6) + INTERVAL %s MICROSECOND "
            f"WHERE {self.where_ids(count)}"
        )


class SqliteDialect(Dialect):
    name = "sqlite"
    placeholder = "?"
    # Text in SQLite: 'YYYY-MM-DD HH:MM:SS.SSS' (UTC) sorts as time does, and compares
    # correctly with the peer's second-resolution 'YYYY-MM-DD HH:MM:SS'.
    now = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
    max_ids = 500

    def create_table(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table} (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "payload BLOB NOT NULL, locked_until DATETIME, "
            "created_at DATETIME DEFAULT CURRENT_TIMESTAMP, message_id TEXT, metadata TEXT)",
            f"CREATE INDEX IF NOT EXISTS {self.index} ON {self.table} (locked_until)",
        ]

    def max_parameters(self) -> int:
        """The most bound parameters in one statement (SQLITE_MAX_VARIABLE_NUMBER's default:
        999 before SQLite 3.32, 32766 since)."""
        import sqlite3

        return 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999

    def claim(self, layout: Layout) -> str:
        """Parameters: (lease as "+N.NNN seconds", limit). Rows come back in no set order."""
        return (
            f"UPDATE {self.table} SET locked_until = strftime('%Y-%m-%d %H:%M:%f', 'now', ?) "
            f"WHERE id IN (SELECT id FROM {self.table} WHERE {self.ready()} "
            f"ORDER BY id LIMIT ?) RETURNING {self.selected(layout)}"
        )


_DIALECTS: dict[str, type[Dialect]] = {
    "postgresql": PostgresDialect,
    "mysql": MysqlDialect,
    "sqlite": SqliteDialect,
}


def dialect_for(kind: str, table: Sequence[str]) -> Dialect:
    """The dialect for `kind` (``postgresql``, ``mysql``, ``sqlite``) and `table`'s parts."""
    return _DIALECTS[kind](table)
