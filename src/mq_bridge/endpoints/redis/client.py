"""Connecting to Redis with redis-py (sync), shared per server and credentials.

One `redis.Redis` client (a thread-safe connection pool) per URL, credentials and TLS
settings is shared by every endpoint of the process through `BuildContext.connections`; a
blocking read holds one pooled connection, so an ack on another thread takes another.

Every call is bounded: connects by `CONNECT_TIMEOUT`, replies by `REPLY_TIMEOUT` (reads
block for at most `MAX_BLOCK` seconds at a time, well inside it). A connection that breaks
is retried once (a pooled socket the server closed on restart), then the error surfaces as
`EndpointUnavailableError`, which routes retry with backoff.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from mq_bridge.endpoints.kit.connections import ConnectionRegistry, Lease, connection_key
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.kit.tls import ssl_context, tls_required
from mq_bridge.errors import ConfigError, EndpointError, EndpointUnavailableError

if TYPE_CHECKING:
    from redis import Redis

    from mq_bridge.endpoints.redis.options import _RedisServer

__all__ = [
    "CONNECT_TIMEOUT",
    "MAX_BLOCK",
    "REPLY_TIMEOUT",
    "acquire_client",
    "driver",
    "raise_translated",
    "translated_errors",
]

CONNECT_TIMEOUT = 5.0
REPLY_TIMEOUT = 10.0
#: The longest single blocking read: `interrupt()` and timeouts are noticed this fast.
MAX_BLOCK = 0.1


def driver(endpoint: str) -> Any:
    """The redis package, or `ConfigError` naming ``pip install 'twainmq[redis]'``."""
    return require_driver("redis", endpoint=endpoint, extra="redis", package="redis")


def acquire_client(
    options: _RedisServer, endpoint: str, registry: ConnectionRegistry
) -> Lease[Redis]:
    """A lease on the shared client for `options`' server, which answered a PING.

    `ConfigError` for bad TLS files or credentials the server refuses,
    `EndpointUnavailableError` when the server cannot be reached.
    """
    redis = driver(endpoint)
    ssl_context(options.tls, options.url, path=f"{endpoint}.tls")  # ConfigError per field
    key = connection_key(
        "redis", url=options.url, username=options.username, password=options.password,
        tls=options.tls,
    )  # fmt: skip
    where = f"{endpoint} {options.server()}"
    with translated_errors(where, endpoint):
        return registry.acquire(key, lambda: _open(redis, options), _close)


def _open(redis: Any, options: _RedisServer) -> Redis:
    client: Redis = redis.Redis.from_url(options.url, **_client_arguments(redis, options))
    try:
        client.ping()
    except BaseException:
        client.close()
        raise
    return client


def _close(client: Redis) -> None:
    client.close()


def _client_arguments(redis: Any, options: _RedisServer) -> dict[str, Any]:
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    arguments: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": REPLY_TIMEOUT,
        # One quick retry: a pooled socket that the server closed (a restart) fails on
        # first use; anything longer is the route's retry, with its backoff and logging.
        "retry": Retry(ExponentialBackoff(cap=0.2, base=0.02), 1),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        "decode_responses": False,
    }
    if options.username is not None:
        arguments["username"] = options.username
    if options.password is not None:
        arguments["password"] = options.password
    arguments.update(_tls_arguments(redis, options))
    return arguments


def _tls_arguments(redis: Any, options: _RedisServer) -> dict[str, Any]:
    """redis-py takes TLS as ``ssl_*`` arguments, not an `ssl.SSLContext`: the same fields."""
    if not tls_required(options.tls, options.url):
        return {}
    tls = options.tls
    arguments: dict[str, Any] = {
        "ssl_ca_certs": tls.ca_file,
        "ssl_certfile": tls.cert_file,
        "ssl_keyfile": tls.key_file,
        "ssl_password": tls.cert_password,
        "ssl_cert_reqs": "none" if tls.accept_invalid_certs else "required",
        "ssl_check_hostname": not tls.accept_invalid_certs,
    }
    if not options.url.lower().startswith("rediss://"):  # TLS asked for by `tls.required`
        arguments["connection_class"] = redis.SSLConnection
    return arguments


@contextmanager
def translated_errors(where: str, endpoint: str) -> Iterator[None]:
    """redis-py's errors as the bridge's: unreachable -> retriable, refused login -> config."""
    from redis import exceptions

    try:
        yield
    except exceptions.AuthenticationError as error:
        raise ConfigError(
            f"{where}: the server refused the login: {error}", path=endpoint
        ) from None
    except (exceptions.ConnectionError, exceptions.TimeoutError, OSError) as error:
        raise EndpointUnavailableError(f"{where}: {error or type(error).__name__}") from error
    except exceptions.RedisError as error:
        raise EndpointError(f"{where}: {error}") from error


def raise_translated(error: BaseException, where: str, endpoint: str) -> NoReturn:
    """Raise `error` as `translated_errors` would: for hot paths, which catch errors
    themselves rather than pay for a context manager on every call."""
    with translated_errors(where, endpoint):
        raise error
    raise error  # not reached: translated_errors swallows nothing


def is_unavailable(error: BaseException) -> bool:
    """Whether `error` (from redis-py) means the server cannot be reached right now."""
    from redis import exceptions

    return isinstance(error, (exceptions.ConnectionError, exceptions.TimeoutError, OSError))


def missing_group(error: BaseException) -> bool:
    """Whether `error` is Redis's NOGROUP: the stream or its group is gone (a restart)."""
    return str(error).startswith("NOGROUP")
