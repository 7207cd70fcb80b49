"""One AMQP connection, driven by pika's `SelectConnection` on an I/O thread of its own.

pika is not thread-safe, so every call into it runs on the connection's thread; callers
hand work over and wait for the broker's answer on a future::

    caller threads (route, Publisher, Consumer)      the connection's I/O thread
    --------------------------------------------     ----------------------------------
    post(fn) / Channel.run(start, timeout)  ──────▶  fn(): publish, ack, declare, ...
    wait on a future / an event             ◀──────  pika callbacks: open, confirm,
                                                     deliver, close

Endpoints share a connection (one channel each) through `acquire`. A lost connection is
not reopened in the background: the next endpoint call that needs it reopens it
(`ensure_open`), bounded by its timeout, with a growing pause between failed attempts, and
raises `EndpointUnavailableError` (retriable) meanwhile; the route's retry loop is the
backoff's other half.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from mq_bridge.endpoints.amqp.options import AmqpOptions
from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.kit.connections import Lease, connection_key
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.kit.tls import ssl_context
from mq_bridge.errors import ClosedError, ConfigError, EndpointError, EndpointUnavailableError

__all__ = ["CONNECT_TIMEOUT", "AmqpConnection", "Channel", "acquire", "connection_parameters"]

log = logging.getLogger("mq_bridge.endpoints.amqp")

#: The bound on opening a connection (TCP, TLS and the AMQP handshake) or a channel.
CONNECT_TIMEOUT = 10.0
_MAX_PAUSE = 2.0  # the longest pause between two failed connection attempts


def acquire(options: AmqpOptions, context: BuildContext) -> Lease[AmqpConnection]:
    """A lease on the (shared) connection for `options`, open when this returns."""
    require_driver("pika", endpoint="amqp", extra="amqp")
    _quiet_pika()
    parameters = connection_parameters(options)
    key = connection_key(
        "amqp", url=options.url, username=options.username, password=options.password,
        tls=options.tls,
    )  # fmt: skip
    lease = context.connections.acquire(
        key, lambda: AmqpConnection(parameters, options.describe()), AmqpConnection.close,
        shared=options.shared,
    )  # fmt: skip
    try:
        lease.connection.ensure_open(CONNECT_TIMEOUT)
    except BaseException:
        lease.release()
        raise
    return lease


def _quiet_pika() -> None:
    """pika logs every failed connection attempt at ERROR, a few lines each; we report
    each loss once ourselves (a warning) and raise the error to the caller. A level the
    application set for ``pika`` is kept."""
    pika_log = logging.getLogger("pika")
    if pika_log.level == logging.NOTSET:
        pika_log.setLevel(logging.CRITICAL)


def connection_parameters(options: AmqpOptions) -> Any:
    """pika's connection parameters: the URL, credentials and TLS of `options`."""
    pika = require_driver("pika", endpoint="amqp", extra="amqp")
    try:
        parameters = pika.URLParameters(options.url)
    except Exception as error:
        raise ConfigError(f"not a usable AMQP URL ({error})", path="amqp.url") from None
    if options.username is not None or options.password is not None:
        current = parameters.credentials
        parameters.credentials = pika.PlainCredentials(
            options.username if options.username is not None else current.username,
            options.password if options.password is not None else current.password,
        )
    context = ssl_context(options.tls, options.url, path="amqp.tls")
    if context is not None:
        parameters.ssl_options = pika.SSLOptions(context, parameters.host)
        if parameters.port == 5672 and ":5672" not in options.url:
            parameters.port = 5671
    parameters.connection_attempts = 1
    parameters.socket_timeout = CONNECT_TIMEOUT
    parameters.stack_timeout = CONNECT_TIMEOUT
    parameters.client_properties = {"connection_name": "mq-bridge (twainmq)"}
    return parameters


class AmqpConnection:
    """A pika connection on its own I/O thread, reopened on demand after a loss."""

    def __init__(self, parameters: Any, target: str) -> None:
        from pika.adapters.select_connection import IOLoop

        self._parameters = parameters
        self.target = target
        self._ioloop = IOLoop()
        self._pika: Any = None  # the SelectConnection; touched on the I/O thread only
        self._opening: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._failures = 0
        self._retry_at = 0.0
        self._thread = threading.Thread(target=self._run, name="mq-bridge-amqp", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._ioloop.start()
        finally:
            self._ioloop.close()

    @property
    def is_open(self) -> bool:
        connection = self._pika
        return connection is not None and connection.is_open

    def post(self, fn: Callable[[], object]) -> None:
        """Run `fn` on the I/O thread, soon (thread-safe; errors are logged)."""
        if self._closed:
            raise ClosedError(f"{self.target}: the connection was closed")
        self._ioloop.add_callback_threadsafe(fn)

    def ensure_open(self, timeout: float) -> None:
        """Return once the connection is open, opening it if needed; raise otherwise."""
        with self._lock:
            if self._closed:
                raise ClosedError(f"{self.target}: the connection was closed")
            if self.is_open:
                return
            opening = self._opening
            if opening is None:
                opening = self._opening = concurrent.futures.Future()
                delay = max(0.0, self._retry_at - time.monotonic())
                self.post(lambda: self._ioloop.call_later(delay, lambda: self._start(opening)))
        try:
            opening.result(timeout)
        except concurrent.futures.TimeoutError:
            raise EndpointUnavailableError(
                f"{self.target}: no AMQP connection within {timeout:g} s"
            ) from None

    def _start(self, opening: concurrent.futures.Future[None]) -> None:
        """On the I/O thread: begin opening a connection that completes `opening`."""
        from pika import SelectConnection

        try:
            self._pika = SelectConnection(
                self._parameters,
                on_open_callback=lambda _: self._opened(opening),
                on_open_error_callback=lambda _, error: self._failed(opening, error),
                on_close_callback=self._lost,
                custom_ioloop=self._ioloop,
            )
        except Exception as error:
            self._failed(opening, error)

    def _opened(self, opening: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._failures = 0
            self._opening = None
        if self._closed:
            self._pika.close()
        opening.set_result(None)

    def _failed(self, opening: concurrent.futures.Future[None], error: BaseException) -> None:
        with self._lock:
            self._failures += 1
            self._retry_at = time.monotonic() + min(_MAX_PAUSE, 0.05 * 2**self._failures)
            self._opening = None
        opening.set_exception(_open_error(error, self.target))

    def _lost(self, connection: Any, reason: BaseException) -> None:
        """On the I/O thread: the connection closed (its channels were told first)."""
        if self._closed:
            self._ioloop.stop()
        else:
            log.warning("%s: AMQP connection lost (%s); reopened on next use", self.target, reason)

    def open_channel(self, on_close: Callable[[Any, BaseException], None]) -> Channel:
        """A new channel on the open connection (opening it first if needed)."""
        self.ensure_open(CONNECT_TIMEOUT)
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def start() -> None:
            connection = self._pika
            if connection is None or not connection.is_open:
                future.set_exception(_unavailable(self.target, "the connection closed"))
                return
            connection.channel(on_open_callback=opened)

        def opened(pika_channel: Any) -> None:
            channel = Channel(self, pika_channel)
            pika_channel.add_on_close_callback(channel.closed_by(on_close))
            future.set_result(channel)

        self.post(start)
        try:
            channel: Channel = future.result(CONNECT_TIMEOUT)
        except concurrent.futures.TimeoutError:
            raise _unavailable(self.target, "no channel opened in time") from None
        return channel

    def close(self) -> None:
        """Close the connection and stop its thread (bounded). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True

        def shut() -> None:
            connection = self._pika
            if connection is not None and not (connection.is_closed or connection.is_closing):
                connection.close()
                self._ioloop.call_later(2.0, self._ioloop.stop)  # if no close-ok comes
            else:
                self._ioloop.stop()

        self._ioloop.add_callback_threadsafe(shut)
        if threading.current_thread() is not self._thread:
            self._thread.join(5.0)


class Channel:
    """A pika channel and the broker calls waiting on it: a closed channel fails them."""

    def __init__(self, connection: AmqpConnection, pika_channel: Any) -> None:
        self.connection = connection
        self.pika = pika_channel
        self.error: BaseException | None = None  # set once the channel closed
        self._waiting: set[concurrent.futures.Future[Any]] = set()

    @property
    def is_open(self) -> bool:
        return self.error is None and self.pika.is_open

    def run(self, start: Callable[[Callable[..., None]], object], timeout: float) -> Any:
        """Call ``start(done)`` on the I/O thread and wait for ``done(result)``.

        `start` begins a broker call (``queue_declare(..., callback=done)``). A channel
        that closes meanwhile fails the wait with its reason.
        """
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def begin() -> None:
            if self.error is not None:
                future.set_exception(self.error)
                return
            self._waiting.add(future)
            try:
                start(lambda result=None: self._finish(future, result))
            except Exception as error:
                self._waiting.discard(future)
                future.set_exception(_channel_error(self.connection.target, error))

        self.connection.post(begin)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise _unavailable(self.connection.target, f"no answer within {timeout:g} s") from None

    def _finish(self, future: concurrent.futures.Future[Any], result: Any) -> None:
        self._waiting.discard(future)
        if not future.done():
            future.set_result(result)

    def closed_by(
        self, on_close: Callable[[Any, BaseException], None]
    ) -> Callable[[Any, BaseException], None]:
        """The pika close callback: fail the waiting calls, then tell the endpoint."""

        def closed(pika_channel: Any, reason: BaseException) -> None:
            self.error = _channel_error(self.connection.target, reason)
            waiting, self._waiting = self._waiting, set()
            for future in waiting:
                if not future.done():
                    future.set_exception(self.error)
            on_close(pika_channel, self.error)

        return closed

    def close(self) -> None:
        """Close the channel (unacknowledged deliveries go back to their queue)."""

        def shut() -> None:
            if self.pika.is_open:
                self.pika.close()

        try:
            self.connection.post(shut)
        except ClosedError:
            pass


def _unavailable(target: str, why: str) -> EndpointUnavailableError:
    return EndpointUnavailableError(f"{target}: {why}")


def _open_error(error: BaseException, target: str) -> Exception:
    """The error `connect()` raises for a failed open: config errors are not retried."""
    from pika import exceptions

    if isinstance(error, exceptions.ProbableAuthenticationError):
        return ConfigError(f"{target}: authentication failed ({error})", path="amqp.password")
    if isinstance(error, exceptions.ProbableAccessDeniedError):
        return ConfigError(f"{target}: access denied (vhost or permissions)", path="amqp.url")
    return EndpointUnavailableError(f"{target}: cannot connect ({error!r})")


def _channel_error(target: str, reason: BaseException) -> EndpointError:
    """A channel closed by the broker for a reason of its own (404, 406) is not retriable;
    one closed with its connection is."""
    from pika import exceptions

    if isinstance(reason, EndpointError):
        return reason
    if isinstance(reason, exceptions.ChannelClosedByBroker):
        return EndpointError(f"{target}: the broker closed the channel: {reason.reply_text}")
    return EndpointUnavailableError(f"{target}: the channel closed ({reason!r})")
