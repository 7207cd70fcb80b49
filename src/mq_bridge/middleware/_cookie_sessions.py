"""The session store of the `cookie_jar` middleware: cookies and captured values, by scope.

Pure parsing and one small locked store; no I/O. The rules are mq-bridge 1.2.0's (a
superset of 0.3.2's, which differs only where noted):

    Cookie: a=1; b=2          ->  cookies a=1, b=2 (``name=value`` pairs split on ``;``)
    Set-Cookie: sid=abc; Path=/   ->  cookie sid=abc (attributes other than Max-Age ignored)
    Set-Cookie: sid=x; Max-Age=0  ->  sid removed (0.3.2 stores "x")
    one metadata value, several lines -> one Set-Cookie each (how 1.2.0 carries several)
    rendered back               ->  ``a=1; b=2``, the ``name=value`` pairs sorted

At most `max_cookies` cookies are kept per session; setting one more drops the one set
longest ago. ``Expires`` is not read (as both peers): ``Max-Age`` is unambiguous, and the
bound keeps the jar small.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

__all__ = [
    "SessionStore",
    "parse_cookie_header",
    "parse_set_cookie_line",
    "render_cookie_header",
    "session_store",
]


def parse_cookie_header(header: str) -> Iterator[tuple[str, str]]:
    """The ``(name, value)`` pairs of a ``Cookie`` header (``a=1; b=2``)."""
    for part in header.split(";"):
        name, equals, value = part.strip().partition("=")
        name = name.strip()
        if equals and name:
            yield name, value.strip()


def parse_set_cookie_line(line: str) -> tuple[str, str | None] | None:
    """``(name, value)`` of one ``Set-Cookie`` header; value None when it expires the
    cookie (``Max-Age`` at or below zero); None when there is no ``name=value``."""
    first, *attributes = line.strip().split(";")
    name, equals, value = first.partition("=")
    name = name.strip()
    if not equals or not name:
        return None
    for attribute in attributes:
        key, equals, age = attribute.partition("=")
        if equals and key.strip().lower() == "max-age" and _at_most_zero(age):
            return name, None
    return name, value.strip()


def _at_most_zero(text: str) -> bool:
    try:
        return int(text.strip()) <= 0
    except ValueError:
        return False


def render_cookie_header(cookies: Mapping[str, str]) -> str | None:
    """The ``Cookie`` header for `cookies` (pairs sorted, as both peers); None for none."""
    if not cookies:
        return None
    return "; ".join(sorted(f"{name}={value}" for name, value in cookies.items()))


class SessionStore:
    """One session: its cookies (oldest set first) and captured values, behind a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cookies: dict[str, str] = {}
        self._values: dict[str, str] = {}

    def capture(
        self,
        metadata: Mapping[str, str],
        cookie_key: str,
        set_cookie_key: str,
        value_keys: tuple[str, ...],
        max_cookies: int,
    ) -> None:
        """Keep the cookies of `metadata`'s `cookie_key` and `set_cookie_key` values and
        the values of its `value_keys`."""
        cookie_header = metadata.get(cookie_key)
        set_cookie_header = metadata.get(set_cookie_key)
        captured = [(key, metadata[key]) for key in value_keys if key in metadata]
        if cookie_header is None and set_cookie_header is None and not captured:
            return
        with self._lock:
            if cookie_header is not None:
                for name, value in parse_cookie_header(cookie_header):
                    self._set_cookie(name, value, max_cookies)
            for line in (set_cookie_header or "").splitlines():
                parsed = parse_set_cookie_line(line)
                if parsed is not None:
                    name, cookie = parsed
                    if cookie is None:
                        self._cookies.pop(name, None)
                    else:
                        self._set_cookie(name, cookie, max_cookies)
            self._values.update(captured)

    def _set_cookie(self, name: str, value: str, max_cookies: int) -> None:
        self._cookies.pop(name, None)  # to the end: the most recently set
        self._cookies[name] = value
        while len(self._cookies) > max(max_cookies, 1):
            del self._cookies[next(iter(self._cookies))]

    def snapshot(self) -> tuple[dict[str, str], dict[str, str]]:
        """Copies of the cookies and the values, taken together."""
        with self._lock:
            return dict(self._cookies), dict(self._values)


_scopes: dict[str, SessionStore] = {}
_scopes_lock = threading.Lock()


def session_store(shared_scope: str | None) -> SessionStore:
    """The process's store for `shared_scope` (made on first use and kept, as the peers
    do); a store of its own without one."""
    if shared_scope is None:
        return SessionStore()
    with _scopes_lock:
        store = _scopes.get(shared_scope)
        if store is None:
            store = _scopes[shared_scope] = SessionStore()
        return store
