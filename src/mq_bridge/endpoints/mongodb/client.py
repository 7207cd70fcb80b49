"""The pymongo client of a `mongodb` endpoint: shared per connection settings, bounded waits,
and pymongo's errors translated into the bridge's.

Every wait is bounded: pymongo's server selection (which is where a call waits while the
server is away) by `SERVER_SELECTION_TIMEOUT_MS`, connects by `CONNECT_TIMEOUT_MS` and
replies by `SOCKET_TIMEOUT_MS`, unless the URL names its own values (URI options win).
pymongo reconnects by itself; while the server is away a call raises the retriable
`EndpointUnavailableError`, so the route's retry loop is the backoff.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pymongo
from pymongo.errors import (
    ConfigurationError,
    ConnectionFailure,
    OperationFailure,
    PyMongoError,
)

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.kit.connections import Lease, connection_key
from mq_bridge.endpoints.kit.tls import ssl_context, tls_required
from mq_bridge.endpoints.mongodb.options import MongoDbOptions
from mq_bridge.errors import ConfigError, EndpointError, EndpointUnavailableError

__all__ = [
    "CONNECT_TIMEOUT_MS",
    "SERVER_SELECTION_TIMEOUT_MS",
    "SOCKET_TIMEOUT_MS",
    "acquire",
    "client_arguments",
    "ping",
    "translated",
]

SERVER_SELECTION_TIMEOUT_MS = 5_000
CONNECT_TIMEOUT_MS = 5_000
SOCKET_TIMEOUT_MS = 30_000
#: MongoDB's "authentication failed" and "unauthorized" codes.
_AUTH_CODES = frozenset({13, 18})


def acquire(options: MongoDbOptions, context: BuildContext) -> Lease[pymongo.MongoClient[Any]]:
    """A lease on the client for `options`' connection settings (`shared`: one per process)."""
    key = connection_key(
        "mongodb",
        url=options.url,
        username=options.username,
        password=options.password,
        tls=options.tls,
    )
    return context.connections.acquire(
        key, lambda: _open(options), _close, shared=options.shared is not False
    )


def _open(options: MongoDbOptions) -> pymongo.MongoClient[Any]:
    arguments, combined_pem = client_arguments(options)
    try:
        client: pymongo.MongoClient[Any] = pymongo.MongoClient(options.url, **arguments)
    except ConfigurationError as error:
        raise ConfigError(f"mongodb: {error}", path="mongodb.url") from None
    except (TypeError, ValueError) as error:  # pymongo's checks of URI option values
        raise ConfigError(f"mongodb: {error}", path="mongodb.url") from None
    finally:
        if combined_pem is not None:
            os.unlink(combined_pem)  # pymongo has read it when the client is made
    return client


def _close(client: pymongo.MongoClient[Any]) -> None:
    client.close()


def client_arguments(options: MongoDbOptions) -> tuple[dict[str, Any], str | None]:
    """pymongo keyword arguments for `options` (URI options in the URL are left to win),
    and the path of a temporary PEM file to delete once the client exists (or None)."""
    named = options.url_options()
    arguments: dict[str, Any] = {"appname": "mq-bridge"}
    for name, value in (
        ("serverSelectionTimeoutMS", SERVER_SELECTION_TIMEOUT_MS),
        ("connectTimeoutMS", CONNECT_TIMEOUT_MS),
        ("socketTimeoutMS", SOCKET_TIMEOUT_MS),
    ):
        if name.lower() not in named:
            arguments[name] = value
    if options.username is not None:
        arguments["username"] = options.username
    if options.password is not None:
        arguments["password"] = options.password
    combined_pem = None
    if tls_required(options.tls, options.url):
        # Checks every file now, with errors naming the field (mongodb.tls.ca_file...).
        ssl_context(options.tls, options.url, path="mongodb.tls")
        arguments["tls"] = True
        tls = options.tls
        if tls.ca_file is not None:
            arguments["tlsCAFile"] = tls.ca_file
        if tls.cert_file is not None:
            pem = tls.cert_file
            if tls.key_file is not None:  # pymongo reads certificate and key from one file
                pem = combined_pem = _combined_pem(tls.cert_file, tls.key_file)
            arguments["tlsCertificateKeyFile"] = pem
        if tls.cert_password is not None:
            arguments["tlsCertificateKeyFilePassword"] = tls.cert_password
        if tls.accept_invalid_certs:
            arguments["tlsAllowInvalidCertificates"] = True
            arguments["tlsAllowInvalidHostnames"] = True
    return arguments, combined_pem


def _combined_pem(cert_file: str, key_file: str) -> str:
    """A private temporary file holding the certificate and then the key."""
    descriptor, path = tempfile.mkstemp(prefix="mq-bridge-mongodb-", suffix=".pem")
    with os.fdopen(descriptor, "wb") as combined:
        for source in (cert_file, key_file):
            with open(source, "rb") as part:
                combined.write(part.read().rstrip(b"\n") + b"\n")
    return path


def ping(client: pymongo.MongoClient[Any], options: MongoDbOptions) -> None:
    """Fail now (bounded by server selection) when the server cannot be used."""
    with translated(f"mongodb {options.server()}: cannot connect"):
        client.admin.command("ping")


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """pymongo's errors as the bridge's: connection problems retriable, others not."""
    try:
        yield
    except ConnectionFailure as error:  # AutoReconnect, timeouts, server selection
        raise EndpointUnavailableError(f"{what}: {_first_line(error)}") from error
    except OperationFailure as error:
        if error.has_error_label("RetryableWriteError"):  # a primary stepping down
            raise EndpointUnavailableError(f"{what}: {_first_line(error)}") from error
        if error.code in _AUTH_CODES:
            raise EndpointError(f"{what}: not authorized ({_first_line(error)})") from error
        raise EndpointError(f"{what}: {_first_line(error)}") from error
    except PyMongoError as error:
        raise EndpointError(f"{what}: {_first_line(error)}") from error


def _first_line(error: BaseException) -> str:
    """pymongo's messages append the whole topology description: keep the first part."""
    text = str(error)
    return text.split(", Timeout:", 1)[0].split("\n", 1)[0]
