"""Options of the `sqlx` endpoint (see `mq_bridge.endpoints.sqlx`).

Names, types, defaults and meanings are mq-bridge-py 0.3.2's ``SqlxConfig`` (so a peer's
config runs unchanged), plus three of mq-bridge 1.2.0's (`max_polling_interval_ms`,
`test_before_acquire`, `source_metadata`) and two of ours (`lease_ms`, `listen_notify`).
Where the peer's schema allows ``null`` for "the default", so do we: a null is read as
the option left out.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, model_validator

from mq_bridge.config.declarations import MAX_MILLISECONDS, OptionError, Options, secret_field
from mq_bridge.endpoints.kit.tls import TlsOptions

__all__ = ["URL_SCHEMES", "SqlxOptions", "database_kind", "table_parts"]

#: URL scheme -> the database it names (the schemes mq-bridge's sqlx accepts, minus SQL
#: Server, which this endpoint does not support).
URL_SCHEMES: dict[str, str] = {
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}

# The peer's rule (`is_valid_table_name`): dot-separated parts of ASCII letters, digits and
# underscores. We allow at most schema.table, and always quote the parts in SQL.
_TABLE_PART = re.compile(r"[A-Za-z0-9_]{1,63}")


def table_parts(table: str) -> tuple[str, ...]:
    """``"schema.table"`` -> ``("schema", "table")``; ValueError when it is not a safe name."""
    parts = tuple(table.split("."))
    if len(parts) > 2 or not all(_TABLE_PART.fullmatch(part) for part in parts):
        raise ValueError(
            f"{table!r} is not a table name: use letters, digits and underscores, optionally "
            "as schema.table (at most 63 characters each)"
        )
    return parts


def database_kind(url: str) -> str:
    """``postgresql``, ``mysql`` or ``sqlite`` for `url`; ValueError for another scheme."""
    scheme, colon, _ = url.partition(":")
    kind = URL_SCHEMES.get(scheme.lower()) if colon else None
    if kind is None:
        schemes = ", ".join(f"{name}://" for name in URL_SCHEMES)
        raise ValueError(f"the URL scheme must be one of {schemes}, not {scheme!r}")
    return kind


class SqlxOptions(Options):
    """General SQLx connection configuration.

    A table used as a queue: PostgreSQL, MariaDB/MySQL or SQLite.
    """

    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset(
        {
            "polling_interval_ms",
            "max_connections",
            "min_connections",
            "acquire_timeout_ms",
            "idle_timeout_ms",
            "max_lifetime_ms",
            "shared",
            "test_before_acquire",
            "lease_ms",
        }
    )

    # Not a `secret_field`: that would make every endpoint's `url` key secret. A password
    # in the URL is hidden wherever config text is shown (config.redaction.redact_text).
    url: str = Field(
        min_length=1,
        description="Database connection URL: postgres:// (or postgresql://), mysql:// (or "
        "mariadb://), sqlite://path. If it contains userinfo, it will be treated as a secret.",
    )
    username: str | None = Field(
        None,
        description="Optional username. Takes precedence over any credentials embedded in the "
        "`url`.",
    )
    password: str | None = secret_field(
        None,
        description="Optional password. Takes precedence over any credentials embedded in the "
        "`url`.",
    )
    table: str = Field(
        min_length=1,
        description="The table to interact with (letters, digits, underscores; schema.table "
        "allowed).",
    )
    insert_query: str | None = Field(
        None,
        description="(Publisher only) Optional. A custom SQL INSERT query. Use `?` as a "
        "placeholder for the payload.\nIf not provided, a default `INSERT INTO {table} "
        "(payload) VALUES (?)` is used (plus `message_id` and `metadata` when the table has "
        "those columns).",
    )
    select_query: str | None = Field(
        None,
        description="(Consumer only) Optional. A custom SQL SELECT query to fetch messages. It "
        "must return `id` and `payload` columns and include a placeholder for the batch size "
        "(`$1` or `?`), to which the bridge binds the batch size. It must claim rows itself.",
    )
    delete_after_read: bool = Field(
        False,
        description="(Consumer only) If true, delete messages after processing (else an "
        "acknowledged row is marked processed and stays in the table).",
    )
    auto_create_table: bool = Field(
        False,
        description="If true, automatically create the table and indexes if they don't exist. "
        "Defaults to false.",
    )
    polling_interval_ms: int | None = Field(
        100,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Consumer only) Polling interval in milliseconds. Defaults to 100ms.",
    )
    max_polling_interval_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Consumer only) If set, the poll interval backs off exponentially from "
        "`polling_interval_ms` up to this value while drained, resetting on new rows. Unset = "
        "constant interval.",
    )
    lease_ms: int | None = Field(
        60_000,
        ge=1,
        le=MAX_MILLISECONDS,
        description="(Consumer only) How long a claimed row stays locked to its consumer "
        "(`locked_until`); a dead consumer's rows are handed out again after this. Defaults to "
        "60000ms, the peer's fixed lease.",
    )
    listen_notify: bool = Field(
        False,
        description="(PostgreSQL only) Wake inputs at once on new rows: outputs send "
        "`NOTIFY` after each committed send, inputs `LISTEN` on a connection of their own "
        "(polling at `polling_interval_ms` stays, so a missed notification only waits for "
        "the next poll). Both sides need it. Defaults to false.",
    )
    source_metadata: bool = Field(
        False,
        description="(Consumer only) Include the mqb.src.sqlx_table and mqb.src.sqlx_id source "
        "positions (as MQB_SOURCE_METADATA=1 does).",
    )
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}),
        description="TLS configuration for the database connection.",
    )
    max_connections: int | None = Field(
        10,
        ge=1,
        le=10_000,
        description="Maximum number of connections in the pool. Defaults to 10.",
    )
    min_connections: int | None = Field(
        0,
        ge=0,
        le=10_000,
        description="Minimum number of connections to keep in the pool. Defaults to 0.",
    )
    acquire_timeout_ms: int | None = Field(
        30_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Timeout for acquiring a connection from the pool in milliseconds. "
        "Defaults to 30000ms.",
    )
    idle_timeout_ms: int | None = Field(
        600_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Maximum idle time for a connection in milliseconds. Defaults to 600000ms "
        "(10 minutes).",
    )
    max_lifetime_ms: int | None = Field(
        1_800_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Maximum lifetime of a connection in milliseconds. Defaults to 1800000ms "
        "(30 minutes).",
    )
    test_before_acquire: bool | None = Field(
        False,
        description="Ping each pooled connection before handing it out (default false). Costs "
        "a round-trip per acquire. Accepted; always on here (endpoints hold their connection, "
        "so acquires are rare).",
    )
    shared: bool | None = Field(
        True,
        description="Share one connection pool per connection (default: true); false forces a "
        "dedicated pool.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SqlxOptions:
        try:
            database_kind(self.url)
        except ValueError as error:
            raise OptionError("url", str(error)) from None
        try:
            table_parts(self.table)
        except ValueError as error:
            raise OptionError("table", str(error)) from None
        if self.listen_notify and self.kind != "postgresql":
            raise OptionError("listen_notify", "works on PostgreSQL only (LISTEN/NOTIFY)")
        if (self.min_connections or 0) > (self.max_connections or 10):
            raise OptionError("min_connections", "must not be more than `max_connections`")
        return self

    @property
    def kind(self) -> str:
        """``postgresql``, ``mysql`` or ``sqlite``."""
        return database_kind(self.url)

    @property
    def polling_interval(self) -> float:
        return (100 if self.polling_interval_ms is None else self.polling_interval_ms) / 1000

    @property
    def max_polling_interval(self) -> float:
        """The longest pause between polls of a drained table (seconds)."""
        if self.max_polling_interval_ms is None:
            return self.polling_interval
        return max(self.polling_interval, self.max_polling_interval_ms / 1000)

    @property
    def notify_channel(self) -> str:
        """The LISTEN/NOTIFY channel of the table (`listen_notify`): the same name on both
        sides when they spell `table` alike; at most 63 characters, PostgreSQL's limit."""
        return f"mqb_sqlx_{self.table.lower()}"[:63]

    @property
    def lease_seconds(self) -> float:
        return (60_000 if self.lease_ms is None else self.lease_ms) / 1000
