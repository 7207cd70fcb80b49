"""Who the console answers, over HTTP with a real server: the Host and Origin checks that
stop a DNS-rebinding page, bad names in paths, and the routes page's health column.

A DNS-rebinding page is a page of another site whose name now resolves to 127.0.0.1: its
requests reach the console as same-origin, but their Host (and a post's Origin) still name
that site. These tests send such requests with `http.client`, which lets a test set both.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from mq_bridge.console import ConsoleServer, ConsoleSettings
from mq_bridge.console import views as console_views
from mq_bridge.errors import ConfigError
from mq_bridge.observability.counters import RouteCounters
from twainmq import Twain
from twainmq.groups import GroupPaths, describe_group

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def send(
    server: ConsoleServer,
    path: str,
    host: str | None = None,
    method: str = "GET",
    fields: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str]:
    """(status, body) of one request whose Host header is `host` (default: the server's)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        connection.putheader("Host", host if host is not None else f"127.0.0.1:{server.port}")
        body = urllib.parse.urlencode(fields).encode() if fields is not None else None
        for name, value in {**(FORM if body else {}), **(headers or {})}.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def csrf_of(server: ConsoleServer) -> str:
    status, page = send(server, "/groups/orders/billing")
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert status == 200 and match, page
    return match.group(1)


def one_line(body: str) -> bool:
    return body.endswith("\n") and body.count("\n") == 1 and "Traceback" not in body


def committed(store_root: Path) -> set[int | None]:
    paths = GroupPaths.of(store_root, "orders", "billing")
    ends = Twain(store_root).end_offsets("orders")
    return {p.committed for p in describe_group(paths, ends).partitions.values()}


# -- Host ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "evil.example", "127.0.0.1.evil.example:{port}", "localhost:1",
     "127.0.0.1:{port}@evil.example", "evil.example@127.0.0.1:{port}", "", "[::2]:{port}",
     "127.0.0.1:{port}/x", "127.0.0.1:notaport"],
)  # fmt: skip
def test_a_forged_host_is_refused_with_421_and_one_line(console: ConsoleServer, host: str) -> None:
    for path in ("/topics", "/topics/orders/messages?partition=0", "/groups/orders/billing"):
        status, body = send(console, path, host.format(port=console.port))
        assert status == 421, (host, path, body)
        assert one_line(body) and "is not a name of this console" in body
        assert "order " not in body and "csrf" not in body  # no payload, no form value


def test_the_local_names_pass_with_the_consoles_port(console: ConsoleServer) -> None:
    port = console.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost.:{port}", f"[::1]:{port}"):
        status, body = send(console, "/topics", host)
        assert status == 200 and 'data-topic="orders"' in body, host


def test_an_allowed_host_passes(store_root: Path) -> None:
    settings = ConsoleSettings(
        store_root=store_root, allowed_hosts=("console.example", "proxy.example:8443")
    )
    with ConsoleServer(settings, 0) as server:
        for host in ("console.example", "console.example:9999", "proxy.example:8443"):
            assert send(server, "/topics", host)[0] == 200, host
        for host in ("proxy.example", "proxy.example:8444", "other.example"):
            assert send(server, "/topics", host)[0] == 421, host


def test_the_bound_address_is_a_name_too(store_root: Path) -> None:
    with ConsoleServer(ConsoleSettings(store_root=store_root, host="127.0.0.2"), 0) as server:
        connection = http.client.HTTPConnection("127.0.0.2", server.port, timeout=30)
        try:
            connection.request("GET", "/topics")  # Host: 127.0.0.2:PORT
            assert connection.getresponse().status == 200
        finally:
            connection.close()


def test_an_allowed_host_that_is_not_a_name_is_a_config_error(store_root: Path) -> None:
    for bad in ("a/b", "user@host", "host:port", ""):
        with pytest.raises(ConfigError, match="allowed host"):
            ConsoleSettings(store_root=store_root, allowed_hosts=(bad,)).check()


# -- Origin and Referer on a post ---------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://evil.example:{port}"}, {"Origin": "null"},
     {"Origin": "http://127.0.0.1:1"}, {"Origin": "file://"},
     {"Referer": "http://evil.example/page"}, {"Referer": "not a url"},
     {"Origin": "http://evil.example", "Referer": "http://127.0.0.1:{port}/groups"}],
)  # fmt: skip
def test_a_forged_origin_on_a_post_is_refused(
    console: ConsoleServer, store_root: Path, headers: dict[str, str]
) -> None:
    before = committed(store_root)
    fields = {"csrf": csrf_of(console), "target": "start", "confirm": "yes"}
    forged = {name: value.format(port=console.port) for name, value in headers.items()}
    status, body = send(console, "/groups/orders/billing/reset", None, "POST", fields, forged)
    assert status == 403 and one_line(body) and "cross-site request refused" in body
    assert committed(store_root) == before


def test_a_post_from_the_consoles_own_page_passes(console: ConsoleServer, store_root: Path) -> None:
    fields = {"csrf": csrf_of(console), "target": "start"}
    own = f"http://127.0.0.1:{console.port}"
    for headers in ({"Origin": own}, {"Referer": f"{own}/groups/orders/billing"}, {}):
        status, body = send(console, "/groups/orders/billing/reset", None, "POST", fields, headers)
        assert status == 200 and 'id="reset-confirm"' in body, headers
    status, _ = send(
        console, "/groups/orders/billing/reset", f"localhost:{console.port}", "POST",
        {**fields, "confirm": "yes"}, {"Origin": f"http://localhost:{console.port}"},
    )  # fmt: skip
    assert status == 303
    assert committed(store_root) == {0}


def test_a_rebinding_page_cannot_read_the_form_value_nor_post_with_it(
    console: ConsoleServer, store_root: Path
) -> None:
    evil = f"evil.example:{console.port}"
    status, page = send(console, "/groups/orders/billing", evil)
    assert status == 421 and "csrf" not in page
    before = committed(store_root)
    fields = {"csrf": csrf_of(console), "target": "start", "confirm": "yes"}  # even if known
    origin = {"Origin": f"http://{evil}"}
    status, _ = send(console, "/groups/orders/billing/reset", evil, "POST", fields, origin)
    assert status == 421
    assert committed(store_root) == before


# -- bad names ----------------------------------------------------------------------------

BAD_PATHS = [
    "/topics/..%2F..%2Fetc", "/topics/%2e%2e", "/topics/..", "/topics/.", "/topics/%00",
    "/topics/a%00b", "/topics/" + "x" * 300, "/topics/" + "x" * 5000, "/topics/..%2Forders",
    "/topics/orders%2F..%2F..", "/topics/%2e%2e/messages", "/topics/%00/messages?partition=0",
    "/topics/%ff", "/topics/%c0%ae%c0%ae", "/topics/a%5Cb", "/topics/a%0Ab", "/topics/%20",
    "/groups/orders/..%2F..", "/groups/..%2F../billing", "/groups/orders/%00",
    "/groups/%00/billing", "/groups/orders/" + "g" * 300, "/groups/orders/.",
    "/topics/orders/messages?partition=x", "/topics/orders/messages?partition=-1",
    "/topics/orders/messages?partition=99999999999999999999999",
]  # fmt: skip
BAD_POSTS = ["/groups/orders/..%2F..%2Fx/reset", "/groups/%00/x/reset", "/groups/..%2F../x/reset",
             "/groups/orders/" + "g" * 300 + "/reset"]  # fmt: skip


@pytest.fixture
def console_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    caplog.set_level(logging.DEBUG, logger="mq_bridge")
    yield caplog


def test_bad_names_answer_400_or_404_with_one_line_and_no_traceback(
    console: ConsoleServer, console_log: pytest.LogCaptureFixture
) -> None:
    csrf = csrf_of(console)
    answers = [(path, *send(console, path)) for path in BAD_PATHS]
    fields = {"csrf": csrf, "target": "start", "confirm": "yes"}
    answers += [(path, *send(console, path, None, "POST", fields)) for path in BAD_POSTS]
    for path, status, body in answers:
        assert status in (400, 404), (path[:60], status, body[:300])
        assert "Traceback" not in body and 'File "' not in body, path[:60]
        if status == 400 and "not a valid" in body:
            assert one_line(body) and len(body) < 300, body
    assert_no_traceback_logged(console_log)


def test_an_over_long_request_line_is_400_and_one_log_line(
    console: ConsoleServer, console_log: pytest.LogCaptureFixture
) -> None:
    with socket.create_connection(("127.0.0.1", console.port), timeout=30) as sock:
        path = b"/topics/" + b"x" * 10_000
        sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % console.port)
        assert sock.recv(65536).split(b"\r\n")[0].endswith(b"400 Bad Request")
    assert_no_traceback_logged(console_log)
    warnings = [r for r in console_log.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "malformed request" in warnings[0].getMessage()
    assert len(warnings[0].getMessage()) < 400
    assert console.bad_requests.count == 1


def assert_no_traceback_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing at ERROR, and no traceback above DEBUG (aiohttp's or ours)."""
    loud = [r for r in caplog.records if r.levelno > logging.DEBUG]
    assert [r.getMessage() for r in loud if r.levelno >= logging.ERROR] == []
    assert [r.getMessage() for r in loud if r.exc_info or "Traceback" in r.getMessage()] == []


# -- the routes page's health column ------------------------------------------------------


class WithoutHealth:
    """A route's counters from before they had `healthy` (the page must still show them)."""

    def __init__(self, route: str) -> None:
        self._counters = RouteCounters(route)

    def __getattr__(self, name: str) -> object:
        if name in ("healthy", "health_reason"):
            raise AttributeError(name)
        return getattr(self._counters, name)


def test_the_routes_page_shows_each_routes_health(
    store_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    well, broken, old = RouteCounters("orders"), RouteCounters("shipping"), WithoutHealth("old")
    broken.set_health("output", "EndpointUnavailableError: rabbitmq is away")
    monkeypatch.setattr(console_views, "all_route_counters", lambda: [well, broken, old])
    settings = ConsoleSettings(store_root=store_root, attached=True)
    with ConsoleServer(settings, 0) as server:
        status, page = send(server, "/routes")
        assert status == 200
        health = dict(re.findall(r'<tr data-route="([^"]+)">.*?data-field="health">([^<]*)<', page))
        assert health == {
            "orders": "healthy",
            "shipping": "unhealthy: output: EndpointUnavailableError: rabbitmq is away",
            "old": "healthy",
        }
        assert '<td class="bad" data-field="health">unhealthy' in page
        rows = {row["route"]: row for row in json.loads(send(server, "/api/routes")[1])}
        assert rows["shipping"]["healthy"] is False
        assert rows["shipping"]["health_reason"].startswith("output: EndpointUnavailableError")
        assert rows["orders"]["healthy"] is True and rows["orders"]["health_reason"] is None
