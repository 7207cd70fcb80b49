"""cookie_jar against a real HTTP server on loopback: cookies kept and sent back.

An aiohttp server (its own loop, on a thread) sets cookies on ``/login``, removes one on
``/logout`` (``Max-Age=0``), answers ``x-token`` on ``/token`` and records the ``Cookie``
header and the other headers of every request; our http output talks to it. What the
peers do was observed with the same flows (docs/compat.md; tests/compat covers them
against mq-bridge-py 0.3.2 and mq-bridge 1.2.0).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.middleware._cookie_sessions import (
    SessionStore,
    parse_cookie_header,
    parse_set_cookie_line,
    render_cookie_header,
)
from tests.mq_bridge.helpers import unique

aiohttp_web = pytest.importorskip("aiohttp.web", reason="pip install '.[http]'")


class CookieServer:
    """Sets and expires cookies by path; records each request's headers (lower-cased)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    async def _answer(self, request: Any) -> Any:
        headers = {name.lower(): value for name, value in request.headers.items()}
        self.seen.append({"path": request.path, **headers})
        response = aiohttp_web.Response(body=b"ok")
        if request.path == "/login":
            response.headers.add("Set-Cookie", "sid=abc; Path=/; HttpOnly")
        elif request.path == "/logout":
            response.headers.add("Set-Cookie", "sid=gone; Path=/; Max-Age=0")
        elif request.path == "/token":
            response.headers.add("x-token", "T-123")
        elif request.path == "/other":
            response.headers.add("Set-Cookie", "theme=dark")
        return response

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = aiohttp_web.Application()
        app.router.add_route("*", "/{tail:.*}", self._answer)
        self._runner = aiohttp_web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        site = aiohttp_web.TCPSite(self._runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> CookieServer:
        self._thread.start()
        assert self._ready.wait(10), "the test server did not start"
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def cookies(self) -> list[str | None]:
        """The Cookie header of each request so far, then forget them."""
        seen, self.seen = self.seen, []
        return [request.get("cookie") for request in seen]


@pytest.fixture
def server() -> Iterator[CookieServer]:
    started = CookieServer().start()
    yield started
    started.stop()


def publisher(server: CookieServer, path: str, **jar: Any) -> Publisher:
    config = {"http": {"url": server.url(path)}, "middlewares": [{"cookie_jar": jar}]}
    return Publisher.from_config(config)


def test_a_cookie_a_response_set_goes_back_with_the_next_request(server: CookieServer) -> None:
    with publisher(server, "/login") as sends:
        sends.send(Message(b"1"))
        sends.send(Message(b"2"))
        sends.send_batch([Message(b"3"), Message(b"4")])
    assert server.cookies() == [None, "sid=abc", "sid=abc", "sid=abc"]


def test_a_shared_scope_shares_the_session_and_each_jar_has_its_own_otherwise(
    server: CookieServer,
) -> None:
    scope = unique("scope")
    with (
        publisher(server, "/login", shared_scope=scope) as login,
        publisher(server, "/api", shared_scope=scope) as api,
        publisher(server, "/api", shared_scope=unique("elsewhere")) as other_scope,
        publisher(server, "/api") as no_scope,
    ):
        login.send(Message(b"credentials"))
        api.send(Message(b"call"))
        other_scope.send(Message(b"call"))
        no_scope.send(Message(b"call"))
    assert server.cookies() == [None, "sid=abc", None, None]


def test_max_age_zero_removes_a_cookie_and_an_explicit_cookie_is_kept_and_remembered(
    server: CookieServer,
) -> None:
    scope = unique("scope")
    with (
        publisher(server, "/login", shared_scope=scope) as login,
        publisher(server, "/other", shared_scope=scope) as other,
        publisher(server, "/logout", shared_scope=scope) as logout,
        publisher(server, "/api", shared_scope=scope) as api,
    ):
        login.send(Message(b"x"))
        other.send(Message(b"x"))
        api.send(Message(b"x"))  # both cookies, sorted
        logout.send(Message(b"x"))
        api.send(Message(b"x"))  # sid removed
        api.send(Message(b"x", {"cookie": "mine=1"}))  # sent as given
        api.send(Message(b"x"))  # and remembered
    cookies = server.cookies()
    assert cookies[2] == "sid=abc; theme=dark"
    assert cookies[4:] == ["theme=dark", "mine=1", "mine=1; theme=dark"]


def test_captured_values_are_injected_and_exported(server: CookieServer) -> None:
    scope = unique("scope")
    jar = {"shared_scope": scope, "export_metadata_prefix": "jar."}
    with (
        publisher(server, "/token", capture_metadata_keys=["x-token"], **jar) as token,
        publisher(server, "/api", inject_metadata={"x-auth": "x-token"}, **jar) as api,
    ):
        reply = token.request(Message(b"login"))
        assert reply.metadata["jar.value.x-token"] == "T-123"
        api.send(Message(b"call"))
        api.send(Message(b"call", {"x-auth": "own"}))  # present: left alone
    first, second = server.seen[-2:]
    assert first["x-auth"] == "T-123" and first["jar.value.x-token"] == "T-123"
    assert second["x-auth"] == "own"


def test_in_a_route_the_jar_works_below_the_handler(server: CookieServer) -> None:
    """A handler that returns a new message (its own metadata) still sends the cookies:
    the jar sits next to the http output, whatever its place in the list."""
    source = unique("in")
    config = {
        "input": {"memory": {"topic": source}},
        "output": {
            "http": {"url": server.url("/login")},
            "middlewares": [{"cookie_jar": {}}, {"retry": {"max_attempts": 2}}],
        },
        "batch_size": 1,
    }
    route = Route.from_config(config).with_handler(lambda message: Message(message.payload))
    with route, Publisher.from_config({"memory": {"topic": source}}) as feed:
        for n in range(3):
            feed.send(str(n).encode())
        for _ in range(100):
            if len(server.seen) == 3:
                break
            threading.Event().wait(0.05)
    assert server.cookies() == [None, "sid=abc", "sid=abc"]


def test_an_input_captures_the_cookies_it_receives_and_exports_them() -> None:
    topic, scope = unique("in"), unique("scope")
    jar = {"cookie_jar": {"shared_scope": scope, "export_metadata_prefix": "s."}}
    with Publisher.from_config({"memory": {"topic": topic}}) as feed:
        feed.send(b"a", {"cookie": "sid=abc; lang=en"})
        feed.send(b"b")
    consumer = Consumer.from_config({"memory": {"topic": topic}, "middlewares": [jar]})
    got = consumer.poll(max=10, timeout_ms=2000)
    consumer.commit()
    consumer.close()
    assert [m.metadata.get("s.cookie.sid") for m in got] == ["abc", "abc"]
    assert got[1].metadata["s.cookie.lang"] == "en"


def test_a_memory_output_gets_the_cookie_metadata_and_nothing_is_requested() -> None:
    scope, topic = unique("scope"), unique("out")
    config = {"memory": {"topic": topic}, "middlewares": [{"cookie_jar": {"shared_scope": scope}}]}
    with Publisher.from_config(config) as sends:
        sends.send(b"login", {"set-cookie": "sid=abc; Path=/"})  # kept, then added (peers)
        sends.send(b"next")
    consumer = Consumer.from_config({"memory": {"topic": topic}})
    got = consumer.poll(max=10, timeout_ms=2000)
    consumer.close()
    assert [m.metadata.get("cookie") for m in got] == ["sid=abc", "sid=abc"]


# --- the pure parts ----------------------------------------------------------------------


def test_parsing_and_rendering() -> None:
    assert list(parse_cookie_header(" a=1; b = 2 ;=x; junk; c=")) == [
        ("a", "1"), ("b", "2"), ("c", ""),
    ]  # fmt: skip
    assert parse_set_cookie_line("sid=abc; Path=/; HttpOnly") == ("sid", "abc")
    assert parse_set_cookie_line("sid=abc; max-age=0") == ("sid", None)
    assert parse_set_cookie_line("sid=abc; Max-Age=-1") == ("sid", None)
    assert parse_set_cookie_line("sid=abc; Max-Age=60") == ("sid", "abc")
    assert parse_set_cookie_line("no equals sign") is None
    assert render_cookie_header({"b": "2", "a": "1"}) == "a=1; b=2"
    assert render_cookie_header({}) is None


def test_a_session_keeps_at_most_max_cookies_dropping_the_least_recently_set() -> None:
    store = SessionStore()
    for name in ("a", "b", "c", "a", "d"):
        store.capture({"set-cookie": f"{name}=1"}, "cookie", "set-cookie", (), 3)
    assert list(store.snapshot()[0]) == ["c", "a", "d"]
    store.capture({"set-cookie": "x=1\ny=2; Max-Age=0\nc=9"}, "cookie", "set-cookie", (), 0)
    assert store.snapshot()[0] == {"c": "9"}  # max_cookies 0 keeps one, as 1.2.0
