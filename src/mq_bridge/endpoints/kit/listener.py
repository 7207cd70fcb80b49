"""The HTTP listeners: one aiohttp server per listen address, shared by path, each on an
event loop that the routes reading from it drive (the http and websocket inputs' server,
kept once here: `attach` / `detach` are its lifecycle, `listen_address` reads an input's URL).

Every http (and websocket) input of the process that listens on the same address shares
one server (one socket), and the server hands each request to the input registered for its
path and method::

    listener 127.0.0.1:8080
        /orders   POST -> input A
        /orders   PUT  -> input B
        *         *    -> input C   (an input without `path` / `method` takes the rest)

A path nobody serves gets 404; a path served for other methods only gets 405 with an
``Allow`` header. The server is aiohttp's low-level server (no router or middleware
chain: the dispatch above is one dict lookup).

Who runs the loop. A listener has an asyncio loop of its own. The route thread that asks
its input for messages runs the loop (`Listener.drive`) until a request is queued for it,
then handles the batch on the same thread and comes back. So a request goes from the
socket to the handler and its reply back to the socket without a single thread hand-off,
the way a handler inside an aiohttp application runs — which is what makes this path
fast, and keeps it fast when the machine is busy (a hand-off between threads costs a
wake-up and a GIL switch each way). One thread drives at a time (a lock); routes sharing
the listener wait for their requests while another drives, and drive themselves when it
stops. When no route has driven the loop for `STANDBY_DELAY` (a slow handler, a
`Consumer` between polls), the listener's standby thread drives it in short slices, so
connections are still accepted, timeouts still answer 504, and limits still answer 503;
a route coming back takes the loop over at once.

Malformed requests (a bad request line or header, a head over aiohttp's limits, broken
chunked framing) are answered 400 by aiohttp; the listener's `bad_requests` counts them and
logs one WARNING line each, rate-limited, instead of aiohttp's traceback per request
(`mq_bridge.endpoints.kit.bad_requests`). The inputs on the listener show the count in
their status details (``malformed_requests``).

Connections: a client must send a whole request head within the listener's header-read
timeout, which is also how long a keep-alive connection may stay idle (aiohttp's
keep-alive timer runs from the connection's start and from the end of each request, and
closes a connection that has not delivered a complete head by then) — so a client that
sends one byte a second holds nothing past that timeout. Bodies are read by the input
within its request timeout.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from mq_bridge.config.declarations import OptionError
from mq_bridge.endpoints.kit.bad_requests import BadRequests
from mq_bridge.endpoints.kit.tls import TlsOptions, tls_required
from mq_bridge.errors import ConfigError, EndpointUnavailableError

if TYPE_CHECKING:
    from aiohttp import web

__all__ = [
    "Listener",
    "RequestHandler",
    "attach",
    "detach",
    "listen_address",
    "server_ssl_context",
]

#: The logger's name predates the move to the kit: kept, so logging configurations that
#: name it still apply (websocket inputs on a listener log here too, as before).
log = logging.getLogger("mq_bridge.endpoints.http")

RequestHandler = Callable[["web.BaseRequest"], Awaitable["web.StreamResponse"]]

T = TypeVar("T")

#: TCP listen backlog (mq-bridge's websocket default; the kernel caps it at somaxconn).
BACKLOG = 4096
#: Seconds to start or stop a listener.
START_TIMEOUT = 10.0
#: Seconds without a route driving the loop before the standby thread drives it, and the
#: length of each of its drives (a route that comes back waits at most that long).
STANDBY_DELAY = 0.1
STANDBY_SLICE = 0.05
#: The standby thread's driver token.
_STANDBY = object()


class Listener:
    """One server socket, its loop, and the request handlers registered on it."""

    def __init__(
        self, host: str, port: int, ssl_context: ssl.SSLContext | None, header_timeout: float
    ) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.header_timeout = header_timeout
        #: path (None: any) -> method (None: any) -> handler
        self.routes: dict[str | None, dict[str | None, RequestHandler]] = {}
        self.loop = asyncio.new_event_loop()
        #: The object whose thread drives the loop now (None: nobody).
        self.driver: object | None = None
        self._driving = threading.Lock()
        self._before_drive: deque[Callable[[], object]] = deque()
        self._last_drive = time.monotonic()
        self._closing = threading.Event()
        self._standby = threading.Thread(
            target=self._drive_when_idle, name=f"mq-bridge-http-{port}", daemon=True
        )
        self._server: Any = None
        self._socket_server: asyncio.base_events.Server | None = None
        #: The malformed requests this listener answered 400 (for every input on it).
        self.bad_requests = BadRequests(log, f"http listener {host}:{port}")

    # -- driving the loop (any thread, one at a time) ----------------------------------

    def drive(
        self, driver: object, timeout: float | None, interrupted: Callable[[], bool] | None = None
    ) -> bool:
        """Run the loop on this thread until `stop()` or `timeout` seconds; False when
        another route drives it (the standby driver is asked to hand it over).

        `interrupted` is asked once `driver` is the driver: true ends the drive at once.
        (An interrupt reads `driver` to stop the loop; one that read it just before it
        was set is seen here, so none is missed.)"""
        if not self._driving.acquire(blocking=False):
            if self.driver is not _STANDBY:
                return False
            self.stop_threadsafe()
            if not self._driving.acquire(timeout=STANDBY_SLICE):
                return False
        loop = self.loop
        try:
            self.driver = driver  # first: see `call_soon_threadsafe`
            if interrupted is not None and interrupted():
                return True
            waiting = self._before_drive
            while waiting:
                loop.call_soon(waiting.popleft())
            timer = None if timeout is None else loop.call_later(timeout, loop.stop)
            loop.run_forever()
            if timer is not None:
                timer.cancel()
        finally:
            self.driver = None
            self._last_drive = time.monotonic()
            self._driving.release()
        return True

    def _drive_when_idle(self) -> None:
        """The standby driver's thread: drive in slices while no route does."""
        while not self._closing.wait(STANDBY_DELAY):
            while time.monotonic() - self._last_drive >= STANDBY_DELAY:
                if self._closing.is_set() or self.loop.is_closed():
                    return
                if not self.drive(_STANDBY, STANDBY_SLICE):
                    break

    def stop(self) -> None:
        """End the current `drive` after the callbacks already due (on the driving thread)."""
        self.loop.stop()

    def stop_threadsafe(self) -> None:
        """End the current `drive` soon, from any thread."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)

    def call_soon_threadsafe(self, callback: Callable[[], object]) -> None:
        """Run `callback` on the loop when it next runs (any thread).

        While nobody drives the loop, the callback waits for the next drive, which starts
        with it: no wake-up of the loop's selector (a pipe write and read) for the usual
        case, a route settling its batch between two drives. (The driver is set before the
        waiting callbacks are taken, so a callback queued as a drive starts is seen by
        that drive or wakes it.)"""
        self._before_drive.append(callback)
        if self.driver is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._run_before_drive)

    def _run_before_drive(self) -> None:
        waiting = self._before_drive
        while waiting:
            waiting.popleft()()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run `coro` to its end on the loop from this thread, taking the loop from its
        current driver (whose `drive` returns early)."""
        while not self._driving.acquire(timeout=0.05):
            self.stop_threadsafe()
        loop = self.loop
        try:
            task = loop.create_task(asyncio.wait_for(coro, timeout))
            task.add_done_callback(lambda _: loop.stop())
            while not task.done():  # a stop meant for an earlier driver ends a run early
                loop.run_forever()
            return task.result()
        finally:
            self._last_drive = time.monotonic()
            self._driving.release()

    # -- the server (on the loop) ------------------------------------------------------

    def start_standby(self) -> None:
        self._standby.start()

    def stop_standby(self) -> None:
        self._closing.set()
        if self._standby.is_alive() and self._standby is not threading.current_thread():
            self.stop_threadsafe()
            self._standby.join(START_TIMEOUT)

    async def start(self) -> None:
        from aiohttp import web_server

        self._server = web_server.Server(
            self._dispatch,
            keepalive_timeout=self.header_timeout,
            # No access log: a logger call per request costs more than our dispatch.
            access_log=None,
            # A client that goes away cancels its request (its reply is not awaited).
            handler_cancellation=True,
            lingering_time=2.0,
            # A malformed request: one line and a count, not a traceback per client.
            logger=self.bad_requests.server_logger,
        )
        try:
            self._socket_server = await self.loop.create_server(
                self._server,
                self.host,
                self.port,
                ssl=self.ssl_context,
                backlog=BACKLOG,
                reuse_address=True,
            )
        except OSError as error:
            raise EndpointUnavailableError(
                f"http: cannot listen on {self.host}:{self.port}: {error.strerror or error}"
            ) from None
        self.bad_requests.what = f"http listener {self.host}:{self.bound_port}"

    @property
    def bound_port(self) -> int:
        """The port actually bound (the one asked for, or the kernel's pick for port 0)."""
        assert self._socket_server is not None
        return int(self._socket_server.sockets[0].getsockname()[1])

    async def stop_serving(self) -> None:
        if self._socket_server is not None:
            self._socket_server.close()
            self._socket_server = None
        if self._server is not None:
            await self._server.shutdown(1.0)
            self._server = None

    def add(self, path: str | None, method: str | None, handler: RequestHandler) -> None:
        methods = self.routes.setdefault(path, {})
        if method in methods:
            where = f"{path or 'every path'} ({method or 'every method'})"
            raise ConfigError(
                f"{self.host}:{self.port}{where} is already served by another input",
                path="http.path",
            )
        methods[method] = handler

    def remove(self, path: str | None, method: str | None, handler: RequestHandler) -> None:
        methods = self.routes.get(path)
        if methods is not None and methods.get(method) == handler:
            del methods[method]
            if not methods:
                del self.routes[path]

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        methods = self.routes.get(request.path) or self.routes.get(None)
        if methods is None:
            return _plain(404, "No HTTP consumer registered for this path")
        handler = methods.get(request.method) or methods.get(None)
        if handler is None:
            allow = ", ".join(sorted(m for m in methods if m is not None))
            return _plain(405, f"Method {request.method} not allowed", {"Allow": allow})
        return await handler(request)


def _plain(status: int, text: str, headers: dict[str, str] | None = None) -> web.Response:
    from aiohttp import web

    return web.Response(status=status, text=text, headers=headers)


#: Listeners by (host, port); guarded by `_lock` (inputs connect from any thread).
_listeners: dict[tuple[str, int], Listener] = {}
_lock = threading.Lock()


def attach(
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    header_timeout: float,
    path: str | None,
    method: str | None,
    handler: RequestHandler,
) -> Listener:
    """Register `handler` on the listener for (host, port), starting it if needed.

    A listener already running with other TLS settings is a `ConfigError` (one socket has
    one TLS setup), and so is a path and method another input already serves.
    """
    with _lock:
        listener = _listeners.get((host, port)) if port else None
        if listener is None:
            listener = Listener(host, port, ssl_context, header_timeout)
            try:
                listener.run(listener.start(), START_TIMEOUT)
            except BaseException:
                listener.loop.close()
                raise
            _listeners[(host, listener.bound_port)] = listener
            listener.start_standby()
        elif (listener.ssl_context is None) != (ssl_context is None):
            raise ConfigError(
                f"{host}:{port} is already served with{'' if listener.ssl_context else 'out'} "
                "TLS by another input: inputs sharing a listen address need the same `tls`",
                path="http.tls",
            )
        try:
            listener.add(path, method, handler)
        except ConfigError:
            if not listener.routes:
                _stop(listener)
            raise
        return listener


def detach(
    listener: Listener, path: str | None, method: str | None, handler: RequestHandler
) -> None:
    """Unregister `handler`; the last one out stops the listener and closes its loop."""
    with _lock:
        listener.remove(path, method, handler)
        if not listener.routes:
            _stop(listener)


def _stop(listener: Listener) -> None:
    for key, value in list(_listeners.items()):
        if value is listener:
            del _listeners[key]
    listener.stop_standby()
    try:
        listener.run(listener.stop_serving(), START_TIMEOUT)
    finally:
        _close_loop(listener.loop)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on a stopped listener's loop (handlers of dropped requests)
    and close it."""
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=START_TIMEOUT))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def server_ssl_context(tls: TlsOptions, url: str) -> ssl.SSLContext | None:
    """The listener's context: TLS when `tls.required` or the URL says https/wss.

    The server presents `cert_file` (+ `key_file`, `cert_password`); with `ca_file`,
    clients must present a certificate it signed (mutual TLS).
    """
    if not tls_required(tls, url):
        return None
    if tls.cert_file is None:
        raise ConfigError(
            "a TLS listener needs `tls.cert_file` (and key_file)", path="tls.cert_file"
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file, password=tls.cert_password or "")
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            f"cannot load the server certificate {tls.cert_file!r}: {error}", path="tls.cert_file"
        ) from None
    if tls.ca_file is not None:
        try:
            context.load_verify_locations(cafile=tls.ca_file)
        except (OSError, ssl.SSLError) as error:
            raise ConfigError(f"cannot load {tls.ca_file!r}: {error}", path="tls.ca_file") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def listen_address(url: str) -> tuple[str, int, bool]:
    """(host, port, tls_by_scheme) of a consumer's `url`: ``host:port`` or a URL."""
    text = url.strip()
    with_scheme = text if "://" in text else f"http://{text}"
    try:
        parts = urlsplit(with_scheme)
        port = parts.port
    except ValueError as error:
        raise OptionError("url", f"not a listen address ({error})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "ws", "wss"):
        raise OptionError("url", f"unsupported scheme {parts.scheme!r}: use host:port")
    if port is None:
        port = 443 if scheme in ("https", "wss") else 80
    host = parts.hostname or "0.0.0.0"
    return host, port, scheme in ("https", "wss")
