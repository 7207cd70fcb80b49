"""Connection URLs as sqlx (mq-bridge) takes them -> SQLAlchemy URLs and driver arguments.

Pure: no connection is opened here. `engine_url` maps ``postgres://``/``postgresql://`` to
psycopg 3, ``mysql://``/``mariadb://`` to PyMySQL (sqlx's ``ssl-mode``/``ssl-ca`` URL
parameters read as TLS settings) and sqlx's SQLite forms to the sqlite3 module; the
`username`/`password` and `tls` options are applied on top. Every connect is bounded
(`CONNECT_TIMEOUT`; PostgreSQL TCP keepalives, MySQL `READ_TIMEOUT`).
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from mq_bridge.endpoints.kit.tls import ssl_context
from mq_bridge.errors import ConfigError

if TYPE_CHECKING:
    from mq_bridge.endpoints.sqlx.options import SqlxOptions

__all__ = ["CONNECT_TIMEOUT", "READ_TIMEOUT", "describe_url", "engine_url"]

CONNECT_TIMEOUT = 5
#: PyMySQL's bound on one reply (a plain FOR UPDATE may wait for InnoDB's 50 s lock wait)
READ_TIMEOUT = 60
#: sqlx's MySQL ssl-mode values: None = no TLS unless asked, False = TLS without checks
_MYSQL_SSL_MODES = {"disabled": None, "preferred": None, "required": False}
_MYSQL_VERIFYING = {"verify_ca", "verify_identity"}


def describe_url(url: str) -> str:
    """`url` without credentials or parameters, for messages and status."""
    scheme, _, rest = url.partition(":")
    if scheme.lower() == "sqlite":
        return f"sqlite:{rest.split('?', 1)[0]}"
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{scheme}://{host}{port}{parts.path}"


def engine_url(options: SqlxOptions) -> tuple[Any, dict[str, Any], bool]:
    """SQLAlchemy's URL for `options`, the driver's connect arguments, and whether the
    database is SQLite in memory."""
    if options.kind == "sqlite":
        return _sqlite_url(options)
    from sqlalchemy.engine import make_url

    try:
        parts = urlsplit(options.url)
        parts.port  # noqa: B018 (ValueError for a port that is not a number)
    except ValueError as error:
        raise ConfigError(f"not a valid URL: {error}", path="sqlx.url") from None
    if not parts.hostname and options.kind == "mysql":
        raise ConfigError("the URL names no host (mysql://host:3306/db)", path="sqlx.url")
    driver = "postgresql+psycopg" if options.kind == "postgresql" else "mysql+pymysql"
    query = dict(parse_qsl(parts.query))
    url = make_url(f"{driver}://{parts.netloc}{parts.path}")
    if options.username is not None:
        url = url.set(username=options.username)
    if options.password is not None:
        url = url.set(password=options.password)
    if options.kind == "postgresql":
        query.pop("statement-cache-capacity", None)  # sqlx's own
        return url, _postgres_arguments(options, query), False
    return url, _mysql_arguments(options, query), False


def _postgres_arguments(options: SqlxOptions, query: dict[str, str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT,
        # a server that vanished without closing the socket is noticed within ~25 s
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        **query,
    }
    tls = options.tls
    if tls.required:
        ssl_context(tls, options.url, path="sqlx.tls")  # checks the files: ConfigError
        if tls.accept_invalid_certs:
            arguments["sslmode"] = "require"
        else:
            arguments["sslmode"] = "verify-full"
            arguments["sslrootcert"] = tls.ca_file or "system"
        for name, value in (("sslcert", tls.cert_file), ("sslkey", tls.key_file)):
            if value:
                arguments[name] = value
        if tls.cert_password:
            arguments["sslpassword"] = tls.cert_password
    return arguments


def _mysql_arguments(options: SqlxOptions, query: dict[str, str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
        "write_timeout": READ_TIMEOUT,
        # A claim's locking read then locks only the rows it takes: under InnoDB's default
        # REPEATABLE READ it would also lock every row it scans past (acked, leased) and
        # the gaps, making acks and other claims wait (or deadlock) on it.
        "init_command": "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    }
    tls = options.tls
    verify: bool | None = None if not tls.required else not tls.accept_invalid_certs
    ca_file = tls.ca_file
    for name, value in query.items():
        if name == "ssl-mode":
            mode = value.lower()
            if mode in _MYSQL_VERIFYING:
                verify = True
            elif mode in _MYSQL_SSL_MODES:
                verify = verify if _MYSQL_SSL_MODES[mode] is None else (verify or False)
            else:
                raise ConfigError(f"unknown ssl-mode {value!r} in the URL", path="sqlx.url")
        elif name == "ssl-ca":
            ca_file = unquote(value)
        elif name in ("charset", "unix_socket"):
            arguments[name] = value
        elif name == "socket":
            arguments["unix_socket"] = value
        elif name != "statement-cache-capacity":
            raise ConfigError(
                f"the URL parameter {name!r} is not supported for MySQL/MariaDB "
                "(supported: ssl-mode, ssl-ca, charset, socket)",
                path="sqlx.url",
            )
    if verify is not None:
        settings = tls.model_copy(update={"required": True, "ca_file": ca_file})
        context = ssl_context(settings, options.url, path="sqlx.tls")
        assert context is not None  # required: True
        if not verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        arguments["ssl"] = context
    return arguments


def _sqlite_url(options: SqlxOptions) -> tuple[Any, dict[str, Any], bool]:
    """sqlx's SQLite URLs: ``sqlite://path``, ``sqlite:///abs/path``, ``sqlite:path``,
    ``sqlite::memory:`` / ``sqlite://:memory:``, with ``?mode=ro|rw|rwc|memory``."""
    from sqlalchemy.engine import URL

    rest = options.url.partition(":")[2]
    path, _, query_text = rest.partition("?")
    if path.startswith("//"):
        path = path[2:]
    path = unquote(path)
    query = dict(parse_qsl(query_text))
    mode = query.pop("mode", None)
    unknown = set(query) - {"cache", "immutable"}
    if unknown:
        raise ConfigError(
            f"the URL parameters {sorted(unknown)} are not supported for SQLite "
            "(supported: mode, cache, immutable)",
            path="sqlx.url",
        )
    memory = path in ("", ":memory:") or mode == "memory"
    timeout = (options.acquire_timeout_ms or 30_000) / 1000
    arguments: dict[str, Any] = {"check_same_thread": False, "timeout": timeout}
    if memory:
        return URL.create("sqlite", database=":memory:"), arguments, True
    if mode or query:
        if mode:
            query["mode"] = mode
        # SQLAlchemy's form for SQLite URI filenames: the parameters go to SQLite
        url = URL.create("sqlite", database=f"file:{path}", query={**query, "uri": "true"})
        return url, arguments, False
    return URL.create("sqlite", database=path), arguments, False
