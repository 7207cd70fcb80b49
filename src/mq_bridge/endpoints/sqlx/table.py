"""The queue table: created when asked (`auto_create_table`), and its columns read at connect.

Reading the columns decides what the endpoint writes and reads: a table made by the peer
(or by hand) with only ``id``, ``payload`` and ``locked_until`` is used as it is: payloads
only. A table without those three cannot be claimed from safely and is refused with a
`ConfigError` that says which columns to add.
"""

from __future__ import annotations

import logging
from typing import Any

from mq_bridge.endpoints.sqlx.connection import Session, is_missing_table
from mq_bridge.endpoints.sqlx.dialects import Dialect, Layout
from mq_bridge.errors import ConfigError

__all__ = ["prepare_table"]

log = logging.getLogger("mq_bridge.endpoints.sqlx")


def prepare_table(
    session: Session, dialect: Dialect, table: str, create: bool, for_input: bool
) -> Layout:
    """Create the table when `create` (and it is missing); return its `Layout`.

    `ConfigError` when it does not exist (without `create`), or, for an input, when it
    lacks the columns that claiming needs.
    """
    if create:
        session.run(lambda connection: _create(connection, dialect))
    try:
        layout = session.run(lambda connection: _describe(connection, dialect))
    except Exception as error:
        if is_missing_table(error) or is_missing_table(error.__cause__ or error):
            raise ConfigError(
                f"the table {table!r} does not exist; create it, or set `auto_create_table: true`",
                path="sqlx.table",
            ) from None
        raise
    if for_input and not layout.is_queue:
        missing = sorted({"id", "payload", "locked_until"} - layout.columns)
        raise ConfigError(
            f"the table {table!r} has no {', '.join(missing)} column: a queue table needs "
            "`id` (ascending key), `payload` and `locked_until` (a nullable timestamp)",
            path="sqlx.table",
        )
    if "payload" not in layout.columns:
        raise ConfigError(f"the table {table!r} has no `payload` column", path="sqlx.table")
    return layout


def _create(connection: Any, dialect: Dialect) -> None:
    cursor = connection.cursor()
    try:
        for statement in dialect.create_table():
            try:
                cursor.execute(statement)
                connection.commit()
            except Exception as error:
                # Another process created it at the same moment (PostgreSQL: a unique
                # violation in its catalog; MySQL: 1061, the index exists).
                connection.rollback()
                if not _already_exists(error):
                    raise
                log.debug("%s: already there (%s)", statement.split("(")[0], error)
    finally:
        cursor.close()


def _already_exists(error: BaseException) -> bool:
    code = getattr(error, "sqlstate", None)
    if code in ("23505", "42P07"):  # unique_violation, duplicate_table
        return True
    args: tuple[Any, ...] = getattr(error, "args", ())
    return bool(args) and args[0] in (1050, 1061)  # table exists, duplicate key name


def _describe(connection: Any, dialect: Dialect) -> Layout:
    cursor = connection.cursor()
    try:
        cursor.execute(dialect.describe())
        described = cursor.description or ()
        cursor.fetchall()
        connection.commit()
    finally:
        cursor.close()
    types = {str(column[0]).lower(): column[1] for column in described}
    return Layout(frozenset(types), types)
