"""Host names as every client library's connect takes them, checked when a config is read.

A name goes through Python's ``idna`` codec on its way to a socket (``asyncio``'s and
``socket``'s ``getaddrinfo``, aiohttp, paho-mqtt): a label (the part between two dots)
longer than 63 characters, or an empty one, raises `UnicodeError` there, which a route
would meet only when it connects. `host_name_problem` asks the same codec first, so that
``mq-bridge validate`` refuses what ``run`` would fail on.

    host_name_problem("broker.example.com")   # None
    host_name_problem("x" * 64 + ".example")  # "not a valid host name 'xx…': label empty or ..."
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["host_name_problem", "url_host_problem"]

_SHOWN_CHARS = 60


def url_host_problem(url: str, default_scheme: str) -> str | None:
    """`host_name_problem` for the host of `url` (``host:port`` or ``scheme://host...``);
    None when it has none or does not parse (what the endpoint's own checks report)."""
    try:
        host = urlsplit(url.strip() if "://" in url else f"{default_scheme}://{url.strip()}")
        name = host.hostname
    except ValueError:
        return None
    return None if not name else host_name_problem(name)


def host_name_problem(host: str) -> str | None:
    """Why `host` cannot be looked up as it is written, or None when it can (an IP address,
    a name whose labels are 1-63 characters)."""
    try:
        host.encode("idna")
    except UnicodeError as error:
        shown = repr(host) if len(host) <= _SHOWN_CHARS else repr(host[:_SHOWN_CHARS]) + "…"
        reason = str(error.__cause__ or error).removeprefix("encoding with 'idna' codec failed ")
        return f"not a valid host name {shown}: {reason.strip('()') or 'empty label'}"
    return None
