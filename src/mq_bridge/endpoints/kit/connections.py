"""Shared broker connections: one per connection settings, reference-counted.

mq-bridge endpoints default to ``shared: true``: every endpoint of the process that
connects with the same settings (URL, credentials, TLS; never topics or queues) uses one
connection. An endpoint asks the registry for a `Lease` and releases it when it closes;
the last release closes the connection:

    key = connection_key("nats", url=options.url, token=options.token, tls=options.tls)
    lease = default_registry().acquire(key, lambda: connect(options), close_client)
    client = lease.connection
    ...
    lease.release()           # or: with lease: ...

``shared=False`` opens a private connection that no other lease sees.

Two threads acquiring one key at once open it once: the first opens (outside the
registry's lock, so a slow connect to one server never blocks acquiring another), the
others wait for it and share the result, or its error. A failed open leaves nothing
registered, so the next acquire tries again. Errors from `close` are logged, not raised.

``close_at_exit=True``, for a connection that lives on the process's asyncio loop
(`kit.event_loop`), also closes it at interpreter exit when some lease was never released
(a script that forgot ``close()``): as the loop shuts down, before its tasks are cancelled
-- after the routes left running were stopped -- so an aiohttp session closes cleanly
instead of warning "Unclosed client session" as it is collected.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from mq_bridge.errors import ClosedError

__all__ = ["ConnectionRegistry", "Lease", "connection_key", "default_registry"]

log = logging.getLogger("mq_bridge.endpoints.connections")

T = TypeVar("T")


def connection_key(kind: str, **settings: Any) -> tuple[Any, ...]:
    """A hashable key for a connection of `kind` (the endpoint's name) with `settings`.

    Dicts (key order ignored), lists, sets, pydantic models and dataclasses nested in the
    settings are turned into tuples, so equal settings always give equal keys:

    >>> connection_key("nats", url="nats://a:4222", tls={"required": True})
    ('nats', (('tls', (('required', True),)), ('url', 'nats://a:4222')))

    (Keys hold credentials: they are never logged.)
    """
    return (kind, _frozen(settings))


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(key), _frozen(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((_frozen(item) for item in value), key=repr))
    if hasattr(value, "model_dump"):  # a pydantic model, without importing pydantic here
        return _frozen(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _frozen(dataclasses.asdict(value))
    hash(value)  # TypeError now, not later in the registry
    return value


class Lease(Generic[T]):
    """One holder's use of a connection; `release` it (or use ``with``) when done."""

    __slots__ = ("_connection", "_lock", "_on_release", "_released")

    def __init__(self, connection: T, on_release: Callable[[], None]) -> None:
        self._connection = connection
        self._on_release = on_release
        self._released = False
        self._lock = threading.Lock()

    @property
    def connection(self) -> T:
        """The connection; `ClosedError` once the lease is released."""
        if self._released:
            raise ClosedError("the connection lease was released")
        return self._connection

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        """Give the connection back (closing it if this was its last lease). Idempotent."""
        with self._lock:
            if self._released:
                return
            self._released = True
        self._on_release()

    def __enter__(self) -> Lease[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class _Shared:
    """A shared connection: its leases' count, and the result of opening it."""

    __slots__ = ("close", "closed", "key", "leases", "opened")

    def __init__(self, key: Hashable, close: Callable[[Any], None]) -> None:
        self.key = key
        self.close = close
        self.closed = False
        self.leases = 1
        self.opened: Future[Any] = Future()

    def close_once(self) -> None:
        """Close the opened connection, the first time only (a release racing the exit)."""
        if self.closed or not self.opened.done() or self.opened.exception() is not None:
            return
        self.closed = True
        _close_quietly(self.close, self.opened.result(), self.key)


class ConnectionRegistry:
    """Connections by key, shared and reference-counted (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shared: dict[Hashable, _Shared] = {}
        #: Open connections acquired with ``close_at_exit``, not closed yet.
        self._close_at_exit: set[_Shared] = set()

    def __len__(self) -> int:
        """The number of shared connections open (or opening)."""
        with self._lock:
            return len(self._shared)

    def acquire(
        self,
        key: Hashable,
        open: Callable[[], T],
        close: Callable[[T], None],
        shared: bool = True,
        close_at_exit: bool = False,
    ) -> Lease[T]:
        """A lease on the connection for `key`, opening it with `open` when there is none.

        The first lease's `close` closes a shared connection. ``shared=False`` always
        opens a private connection, closed when its lease is released. Errors from
        `open` propagate (to every thread waiting for that open). `close_at_exit`: see
        the module docstring.
        """
        if not shared:
            private = _Shared(key, close)
            self._open_into(private, open, close_at_exit)
            return Lease(private.opened.result(), lambda: self._close(private))
        with self._lock:
            entry = self._shared.get(key)
            opener = entry is None
            if entry is None:
                entry = self._shared[key] = _Shared(key, close)
            else:
                entry.leases += 1
        if opener:
            self._open(key, entry, open, close_at_exit)
        try:
            connection = entry.opened.result()
        except BaseException:
            # Interrupted while another thread opens it, or that open failed: give our
            # share back once it is open (nothing to give back when the open failed).
            entry.opened.add_done_callback(lambda _: self._release_if_opened(key, entry))
            raise
        return Lease(connection, lambda: self._release(key, entry))

    def _open(
        self, key: Hashable, entry: _Shared, open: Callable[[], Any], close_at_exit: bool
    ) -> None:
        try:
            self._open_into(entry, open, close_at_exit)
        except BaseException:
            with self._lock:
                if self._shared.get(key) is entry:
                    del self._shared[key]
            raise

    def _open_into(self, entry: _Shared, open: Callable[[], Any], close_at_exit: bool) -> None:
        try:
            connection = open()
        except BaseException as error:
            entry.opened.set_exception(error)
            raise
        if close_at_exit:
            from mq_bridge.endpoints.kit.event_loop import before_loop_exit  # not eagerly

            with self._lock:
                self._close_at_exit.add(entry)
            before_loop_exit(self.close_left_open)
        entry.opened.set_result(connection)

    def _close(self, entry: _Shared) -> None:
        with self._lock:
            self._close_at_exit.discard(entry)
        entry.close_once()

    def close_left_open(self) -> None:
        """Close the ``close_at_exit`` connections whose leases were never all released
        (run at interpreter exit; also callable by hand). Their leases stay usable only
        in name: the connection is closed."""
        with self._lock:
            left, self._close_at_exit = list(self._close_at_exit), set()
            for entry in left:
                if self._shared.get(entry.key) is entry:
                    del self._shared[entry.key]
        for entry in left:
            entry.close_once()

    def _release_if_opened(self, key: Hashable, entry: _Shared) -> None:
        if entry.opened.exception() is None:
            self._release(key, entry)

    def _release(self, key: Hashable, entry: _Shared) -> None:
        with self._lock:
            entry.leases -= 1
            if entry.leases:
                return
            if self._shared.get(key) is entry:
                del self._shared[key]
        self._close(entry)


def _close_quietly(close: Callable[[Any], None], connection: Any, key: Hashable) -> None:
    try:
        close(connection)
    except Exception:
        kind = key[0] if isinstance(key, tuple) and key else type(connection).__name__
        log.warning("closing a %s connection failed", kind, exc_info=True)


_DEFAULT = ConnectionRegistry()


def default_registry() -> ConnectionRegistry:
    """The process's registry, which the endpoints share."""
    return _DEFAULT
