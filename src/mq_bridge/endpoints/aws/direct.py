"""SQS calls without botocore's request pipeline: the endpoint's hot path.

botocore spends about 0.7 ms of CPU on every call (its event hooks, request and response
objects, header parsing through `email`, urllib3), more than a local SQS server takes to
answer, and most of a one-at-a-time `send`. `DirectSqs` sends the very request botocore
sends for SQS (AWS JSON 1.0: a POST of the parameters as JSON, ``X-Amz-Target:
AmazonSQS.<Operation>``), signed by botocore's own SigV4 signer with the session's
credentials (refreshed as botocore refreshes them), on a kept `http.client` connection (a
small pool: a call takes one, or opens one, and gives it back), and returns the same answer
dict (SQS's JSON is what boto3 returns, key for key).

It is used only where it does what botocore would: not when a proxy is configured for the
endpoint (botocore honours proxies; this does not). TLS verifies with the CA bundle botocore
would use (``AWS_CA_BUNDLE`` / ``ca_bundle``, else botocore's own). Errors are raised as
botocore's (`ClientError` with the code botocore reports, `EndpointConnectionError`,
`ReadTimeoutError`), so callers translate them as before. A request is sent once more only
when a kept connection turned out closed before any answer (the server closed it while
idle); a connection that fails otherwise raises (the caller's retry decides).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

__all__ = ["DirectSqs"]

_CONTENT_TYPE = "application/x-amz-json-1.0"
#: Idle connections kept for reuse (more are opened when more calls run at once).
_POOL_SIZE = 8


class DirectSqs:
    """POSTs SQS operations to `endpoint_url` (see the module docstring). Thread-safe."""

    def __init__(
        self,
        endpoint_url: str,
        credentials: Any,
        region: str,
        ca_bundle: str | None,
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        parts = urlsplit(endpoint_url)
        self._url = endpoint_url
        self._host = parts.hostname or ""
        self._tls = parts.scheme == "https"
        self._port = parts.port or (443 if self._tls else 80)
        self._path = parts.path or "/"
        self._credentials = credentials
        self._region = region
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._ssl = ssl.create_default_context(cafile=ca_bundle) if self._tls else None
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._closed = False

    @staticmethod
    def usable(endpoint_url: str) -> bool:
        """Whether this does what botocore would for `endpoint_url` (no proxy for it)."""
        from botocore.utils import get_environ_proxies

        return not get_environ_proxies(endpoint_url)

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer to `operation` with `params`, as boto3's client method returns it."""
        body = json.dumps(params, separators=(",", ":")).encode()
        headers = self._signed(operation, body)
        status, reason, data, query_error = self._post(body, headers)
        if status >= 300:
            raise _client_error(operation, status, reason, data, query_error)
        answer: dict[str, Any] = json.loads(data) if data else {}
        return answer

    def _signed(self, operation: str, body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(
            method="POST",
            url=self._url,
            data=body,
            headers={"Content-Type": _CONTENT_TYPE, "X-Amz-Target": f"AmazonSQS.{operation}"},
        )
        credentials = self._credentials.get_frozen_credentials()
        SigV4Auth(credentials, "sqs", self._region).add_auth(request)
        return dict(request.headers.items())

    def _post(self, body: bytes, headers: dict[str, str]) -> tuple[int, str, bytes, str | None]:
        while True:
            connection, reused = self._connection()
            try:
                connection.request("POST", self._path, body, headers)
                response = connection.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as error:
                self._drop(connection)
                if reused and _closed_while_idle(error):
                    continue  # a kept connection the server had closed: once more, fresh
                raise _connection_error(self._url, error) from error
            if response.will_close:
                self._drop(connection)
            else:
                self._give_back(connection)
            return response.status, response.reason, data, response.getheader("x-amzn-query-error")

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle kept connection (True: reused), else a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        connection: http.client.HTTPConnection
        if self._tls:
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self._connect_timeout, context=self._ssl
            )
        else:
            connection = http.client.HTTPConnection(
                self._host, self._port, timeout=self._connect_timeout
            )
        try:
            connection.connect()
        except OSError as error:
            connection.close()
            raise _connection_error(self._url, error) from error
        assert connection.sock is not None
        connection.sock.settimeout(self._read_timeout)
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, False

    def _give_back(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _POOL_SIZE:
                self._idle.append(connection)
                return
        connection.close()

    @staticmethod
    def _drop(connection: http.client.HTTPConnection) -> None:
        connection.close()

    def close(self) -> None:
        """Close the idle connections (calls in progress close theirs when done)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


def _closed_while_idle(error: BaseException) -> bool:
    return isinstance(
        error,
        (
            http.client.RemoteDisconnected,
            http.client.BadStatusLine,
            BrokenPipeError,
            ConnectionResetError,
        ),
    )


def _connection_error(url: str, error: BaseException) -> Exception:
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

    if isinstance(error, (TimeoutError, socket.timeout)):
        return ReadTimeoutError(endpoint_url=url, error=error)
    return EndpointConnectionError(endpoint_url=url, error=error)


def _client_error(
    operation: str, status: int, reason: str, data: bytes, query_error: str | None
) -> Exception:
    """The `ClientError` botocore raises for this answer (SQS's query-compatible code)."""
    from botocore.exceptions import ClientError

    try:
        document = json.loads(data) if data else {}
    except ValueError:
        document = {}
    if not isinstance(document, dict):
        document = {}
    code = str(document.get("__type", "")).rpartition("#")[2]
    if query_error:  # "AWS.SimpleQueueService.NonExistentQueue;Sender", as botocore reads it
        code = query_error.partition(";")[0] or code
    message = document.get("message") or document.get("Message") or reason
    response: Any = {
        "Error": {"Code": code or str(status), "Message": str(message)},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, operation)
