"""Which requests the console answers: its ``Host`` must name it, a post must come from it.

A page on another site cannot read the console's answers (the browser's same-origin rule),
unless that site's own name resolves to 127.0.0.1. That is DNS rebinding: evil.example
first resolves to the attacker's server, which serves a script, then to 127.0.0.1, and
the script reads ``http://evil.example:8470/topics/orders/messages`` as its own origin:
payloads included, and with ``--allow-actions`` it reads the form value off a group page
and posts a reset. What such a request cannot hide is the name it was sent to, in its
``Host`` header. So the console answers only a request whose ``Host`` is one of its names:

    localhost, 127.0.0.1, [::1] and the address it listens on      each with its port
    every --allowed-host NAME                                       any port
    every --allowed-host NAME:PORT                                  that port

and refuses the rest with 421 (Misdirected Request). A request that changes state (any
method but GET/HEAD/OPTIONS) must also come from a page of one of those names: its
``Origin`` header, else its ``Referer``, names one (else 403). A client that sends neither
(curl, a script) passes that check, and still needs the form value and the token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler, Middleware

__all__ = ["Handler", "HostRule", "access_middleware", "refusal", "shown"]

#: The names of this machine that every console answers to (with its port).
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_NOT_IN_AUTHORITY = frozenset("@/\\?# \t\r\n")
_SHOWN_CHARS = 80


@dataclass(frozen=True)
class HostRule:
    """The ``host[:port]`` values a console answers to (see the module docstring)."""

    #: names that must come with the console's own port (local names, the bound address)
    own: frozenset[str]
    #: ``--allowed-host NAME``: with any port
    any_port: frozenset[str]
    #: ``--allowed-host NAME:PORT``: with that port
    exact: frozenset[tuple[str, int]]

    @classmethod
    def of(cls, bound_host: str, allowed: Iterable[str] = ()) -> HostRule:
        """The rule of a console bound to `bound_host`, with `allowed` names added.

        `ValueError` for an allowed name that is not ``NAME`` or ``NAME:PORT``."""
        own = {*LOCAL_NAMES, _normal(bound_host.strip("[]"))}
        any_port: set[str] = set()
        exact: set[tuple[str, int]] = set()
        for text in allowed:
            parsed = split_authority(text)
            if parsed is None:
                raise ValueError(f"not NAME or NAME:PORT: {text!r}")
            name, port = parsed
            if port is None:
                any_port.add(name)
            else:
                exact.add((name, port))
        return cls(frozenset(own), frozenset(any_port), frozenset(exact))

    def allows(self, authority: str, port: int | None) -> bool:
        """True when a ``Host`` (or an origin's ``host[:port]``) of `authority` names this
        console, which listens on `port`."""
        parsed = split_authority(authority)
        if parsed is None:
            return False
        name, given = parsed
        if name in self.any_port:
            return True
        if name in self.own and port is not None:
            return given == port or (given is None and port == 80)
        return (name, 80 if given is None else given) in self.exact


def split_authority(text: str) -> tuple[str, int | None] | None:
    """``"Local.Host.:8470"`` -> ``("local.host", 8470)``; ``"[::1]"`` -> ``("::1", None)``;
    None for what is not a ``host[:port]`` (userinfo, a path, a bad port)."""
    if not text or any(char in _NOT_IN_AUTHORITY for char in text):
        return None
    try:
        parts = urlsplit(f"//{text}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return _normal(parts.hostname), port


def _normal(name: str) -> str:
    return name.lower().rstrip(".")


def access_middleware(rule: HostRule) -> Middleware:
    """The aiohttp middleware that applies `rule` to every request."""

    @web.middleware
    async def check_access(request: web.Request, handler: Handler) -> web.StreamResponse:
        port = _local_port(request)
        host = request.headers.get(hdrs.HOST, "")
        if not rule.allows(host, port):
            return refusal(
                421,
                f"Host {shown(host)} is not a name of this console: open it as "
                f"http://127.0.0.1:{port}/ or start it with --allowed-host NAME",
            )
        if request.method not in _SAFE_METHODS:
            problem = _cross_site(request, rule, port)
            if problem is not None:
                return refusal(403, problem)
        return await handler(request)

    return check_access


def refusal(status: int, message: str) -> web.Response:
    """A one-line text answer."""
    return web.Response(status=status, text=f"mq-bridge console: {message}\n")


def _cross_site(request: web.Request, rule: HostRule, port: int | None) -> str | None:
    """Why a state-changing request is refused as coming from another site, or None."""
    for header in (hdrs.ORIGIN, hdrs.REFERER):
        value = request.headers.get(header)
        if value is None:
            continue
        try:
            parts = urlsplit(value)
            scheme, netloc = parts.scheme, parts.netloc
        except ValueError:
            scheme = netloc = ""
        if scheme not in ("http", "https") or not rule.allows(netloc, port):
            return f"cross-site request refused: {header} {shown(value)} is not this console"
        return None
    return None  # neither header: not a browser's cross-site post (the form value still counts)


def _local_port(request: web.Request) -> int | None:
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    if isinstance(sockname, tuple) and len(sockname) >= 2 and isinstance(sockname[1], int):
        return sockname[1]
    return None


def shown(text: str) -> str:
    """`text` quoted for a one-line answer (or a log line), cut when long."""
    if len(text) > _SHOWN_CHARS:
        return repr(text[:_SHOWN_CHARS]) + f"… ({len(text):,} characters)"
    return repr(text)
