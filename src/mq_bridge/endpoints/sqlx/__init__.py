"""sqlx: a database table as a queue: PostgreSQL, MariaDB/MySQL and SQLite.

This module is the builders; `options` declares the options, `urls` reads sqlx's URLs,
`connection` opens the pool (SQLAlchemy 2 Core over psycopg 3, PyMySQL or the standard
sqlite3) and holds one connection per endpoint, `table` creates and reads the table's
layout, `dialects` is the SQL per database (the claim protocol is drawn there), `codec`
maps rows to messages, `ahead` claims one batch ahead, `held` holds PostgreSQL claims in
an open transaction (`delete_after_read`), `listen` wakes inputs on NOTIFY.

Features
    - Output: one row per message (payload, plus message_id and metadata when the table
      has those columns, as tables we create do). `send` is one transaction and returns
      after COMMIT; a batch is one COPY (PostgreSQL; binary format for our column
      types), multi-row INSERTs of hex literals (MariaDB) or multi-row INSERTs of up to
      500 rows (SQLite). `insert_query` replaces the INSERT (the payload bound to its one
      ``?``/``$1``).
    - Input: competing consumers. A claim leases the lowest ready rows (``locked_until``
      = now + `lease_ms`) in one short transaction, with ``FOR UPDATE SKIP LOCKED`` on
      PostgreSQL and MariaDB >= 10.6 / MySQL >= 8 (consumers never wait for each other)
      and SQLite's single writer elsewhere: no row is claimed twice, and a dead
      consumer's rows are ready again when their lease ends. ack = DELETE
      (`delete_after_read`) or mark processed (``locked_until`` = the far future); nack
      and close = ready again at once. mq-bridge's consumers use the same protocol and
      columns, so ours and theirs can share a table. After a full batch the next claim
      runs ahead on a second connection (servers only; `ahead`). PostgreSQL with
      `delete_after_read` claims by DELETE in a transaction held open until the ack
      (COMMIT; nack = ROLLBACK; `held`): each row written once, a dead consumer's rows
      back at once, a hung one's after `lease_ms`.
    - `listen_notify` (PostgreSQL): outputs NOTIFY after each send, inputs LISTEN and
      claim at once, polling kept as the fallback (`listen`).
    - Tables created by mq-bridge (id, payload, locked_until, created_at) are read and
      written as they are (payload only); `auto_create_table` creates ours, which adds
      ``message_id`` and ``metadata``. A table missing ``id``/``payload``/``locked_until``
      is refused at connect, as is a missing table without `auto_create_table`.
    - Rows without a message_id get a stable id from table and row id.
      ``status().pending`` is the number of ready rows. With ``MQB_SOURCE_METADATA=1``
      (or `source_metadata`) inputs add ``mqb.src.sqlx_table`` and ``mqb.src.sqlx_id``.
    - A lost connection (server restart) is replaced; a call is retried once on a new
      connection, then fails with `EndpointUnavailableError` (retriable).

URL
    postgres://[user[:password]@]host[:port]/database[?sslmode=...]  (also postgresql://)
    mysql://[user[:password]@]host[:port]/database[?ssl-mode=REQUIRED]  (also mariadb://)
    sqlite://relative/path.db, sqlite:///absolute/path.db, sqlite::memory:
    (``?mode=rwc|rw|ro|memory``)

Options (declared in `options.py`, `SqlxOptions`; mq-bridge-py 0.3.2's names)
    url                     the database (required; userinfo in it is a secret)
    table                   the table, ``name`` or ``schema.name`` (required)
    insert_query            output: custom INSERT with one payload placeholder
    select_query            input: custom claiming SELECT with one batch-size placeholder
    delete_after_read       input: ack deletes (default false: ack marks processed)
    auto_create_table       create the table and its index if missing (default false)
    polling_interval_ms     input: pause between polls of a drained table (default 100)
    max_polling_interval_ms input: back off up to this while drained (default: no backoff)
    lease_ms                input: how long a claim lasts (default 60000)
    listen_notify           PostgreSQL: NOTIFY after sends, inputs wake on it (default false)
    source_metadata         input: add mqb.src.sqlx_* (default false)
    username, password      credentials, over those in the URL (password is a secret)
    tls                     TLS block (PostgreSQL: verify-full unless accept_invalid_certs)
    max_connections, min_connections, acquire_timeout_ms, idle_timeout_ms,
    max_lifetime_ms, test_before_acquire
                            the pool (defaults 10, 0, 30000, 600000, 1800000, false)
    shared                  share one pool per database and settings (default true)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.sqlx.options import SqlxOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.sqlx.input import SqlxInput
    from mq_bridge.endpoints.sqlx.output import SqlxOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = SqlxOptions


def build_input(options: SqlxOptions, context: BuildContext) -> SqlxInput:
    """A competing consumer of the table."""
    from mq_bridge.endpoints.sqlx.input import SqlxInput

    return SqlxInput(options, context)


def build_output(options: SqlxOptions, context: BuildContext) -> SqlxOutput:
    """A writer of rows to the table."""
    from mq_bridge.endpoints.sqlx.output import SqlxOutput

    return SqlxOutput(options, context)
