"""Malformed client requests to an aiohttp server: counted, and logged one short line each.

aiohttp answers a request it cannot parse (a bad request line, a bad header, a head over
its limits, broken chunked framing) with 400 itself, and reports it to the server's
``logger`` with ``logger.exception(...)``: a traceback at ERROR for every bad request a
client sends (15 of them made 9.4 KB of log). Any client can send them, so they say
nothing about the server; what an operator needs is that they happen, and how often.

A `BadRequests` is one server's record of them. Its `server_logger` is what the server is
given as its ``logger``: a parse error reported through it becomes one WARNING line on
the endpoint's logger, at most `burst` lines every `interval` seconds (the next line
allowed says how many were left out), and one more in `count`; the traceback goes to
DEBUG. Whatever else the server reports (an unexpected error in a handler: a bug) reaches
aiohttp's own ``aiohttp.server`` logger as before. An endpoint that finds a malformed
request itself (a bad WebSocket handshake or frame) calls `note`.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, Any

__all__ = ["BadRequests", "describe", "is_malformed_request"]

#: Lines logged at most per `interval` before the rest are only counted.
BURST = 10
INTERVAL = 10.0
_REASON_CHARS = 160


class BadRequests:
    """The malformed requests one server has seen (`count`), logged as they come."""

    def __init__(
        self, log: logging.Logger, what: str, burst: int = BURST, interval: float = INTERVAL
    ) -> None:
        self.log = log
        self.what = what
        self.count = 0
        self._burst = burst
        self._interval = interval
        self._window_start = -interval
        self._logged_in_window = 0
        self._left_out = 0
        self._last_error: BaseException | None = None
        self.server_logger = _ServerLogger(self)

    def note(self, remote: str | None, reason: str, error: BaseException | None = None) -> None:
        """Count one malformed request from `remote`; log it unless over the rate limit.

        The same `error` noted twice counts once: a body that broke mid-read raises in the
        handler (which notes it and answers 400) and again when aiohttp drains the body."""
        if error is not None:
            root = error.__cause__ or error  # aiohttp wraps the parser's error the 2nd time
            if root is self._last_error:
                return
            self._last_error = root
        self.count += 1
        now = time.monotonic()
        if now - self._window_start >= self._interval:
            self._window_start, self._logged_in_window = now, 0
        if self._logged_in_window >= self._burst:
            self._left_out += 1
        else:
            self._logged_in_window += 1
            left_out, self._left_out = self._left_out, 0
            more = f" ({left_out:,} more not logged)" if left_out else ""
            self.log.warning(
                "%s: malformed request from %s: %s%s", self.what, remote or "?", reason, more
            )
        if error is not None:
            self.log.debug("%s: the malformed request's error", self.what, exc_info=error)


def describe(error: BaseException) -> str:
    """``BadHttpMessage: Invalid header token: b'Bad Header: x'``: the error on one line
    (aiohttp's lines joined, its caret line dropped), printable, cut."""
    if is_malformed_request(error.__cause__):  # RequestPayloadError: the parser's own error
        error = error.__cause__  # type: ignore[assignment]
    text = str(getattr(error, "message", "") or error)
    lines = [line.strip() for line in text.splitlines()]
    joined = " ".join(line for line in lines if line and line.strip("^"))
    shown = "".join(char if char.isprintable() else "?" for char in joined)
    if len(shown) > _REASON_CHARS:
        shown = shown[:_REASON_CHARS] + "…"
    return f"{type(error).__name__}: {shown}" if shown else type(error).__name__


def is_malformed_request(error: object) -> bool:
    """True for aiohttp's errors about what a client sent: an `HttpProcessingError`, or the
    `RequestPayloadError` a body broken after its head was read arrives as (aiohttp's
    Python parser; its C parser leaves such a body waiting for the request timeout)."""
    try:
        from aiohttp.http_exceptions import HttpProcessingError
        from aiohttp.web_protocol import RequestPayloadError
    except ImportError:  # pragma: no cover - the servers that use this run on aiohttp
        return False
    return isinstance(error, (HttpProcessingError, RequestPayloadError))


if TYPE_CHECKING:
    _Adapter = logging.LoggerAdapter[logging.Logger]
else:  # LoggerAdapter takes a type parameter from Python 3.11
    _Adapter = logging.LoggerAdapter


class _ServerLogger(_Adapter):
    """The ``logger`` an aiohttp server reports to (see the module docstring)."""

    def __init__(self, record: BadRequests) -> None:
        super().__init__(logging.getLogger("aiohttp.server"), {})
        self._record = record

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        if self._noted(args, exc_info):
            return
        super().exception(msg, *args, exc_info=exc_info, **kwargs)

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        # aiohttp reports a bad method on a connection's first request (TLS or other
        # traffic on a plain HTTP port) at DEBUG: it is a malformed request all the same.
        error = kwargs.get("exc_info")
        if isinstance(error, BaseException) and self._noted(args, error):
            return
        super().debug(msg, *args, **kwargs)

    def _noted(self, args: tuple[object, ...], exc_info: Any) -> bool:
        error = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if not is_malformed_request(error):
            return False
        assert error is not None
        remote = args[0] if args and isinstance(args[0], str) else None
        self._record.note(remote, describe(error), error)
        return True
