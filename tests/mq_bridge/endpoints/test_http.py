"""The `http` endpoint: our server input and client output over loopback, each side real.

Every test starts its listener on a free loopback port; requests go through the standard
library's `http.client` (a plain HTTP/1.1 client whose every byte we control) or through
our http output. Nothing is mocked.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.errors import ConfigError, EndpointUnavailableError, RequestTimeoutError, SendError
from tests.helpers import free_port

BODY = b'{"order": 42}'


def http_config(port: int, **options: Any) -> dict[str, Any]:
    return {"http": {"url": f"127.0.0.1:{port}", **options}}


@contextmanager
def serving(handler: Callable[[Message], Any] | None, port: int, **options: Any) -> Iterator[Route]:
    """A route: http input on `port` -> handler -> response."""
    config = {"input": http_config(port, **options), "output": {"response": {}}}
    route = Route.from_config(config)
    if handler is not None:
        route = route.with_handler(handler)
    with route:
        yield route


def call(
    port: int,
    path: str = "/",
    body: bytes | None = BODY,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    timeout: float = 20,
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers lower-cased, body) of one request on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        connection.close()


# -- input: request/reply -----------------------------------------------------------------


def test_a_reply_answers_200_with_its_payload_and_the_headers_the_handler_added() -> None:
    seen: list[Message] = []

    def handle(message: Message) -> Message:
        seen.append(message)
        return message.with_metadata({"x-total": "7", "content-type": "application/json"})

    port = free_port()
    with serving(handle, port, path="/orders"):
        status, headers, body = call(
            port,
            "/orders?debug=1",
            headers={"X-Trace": "abc", "message-id": "0190f1a2b3c4d5e6f708192a3b4c5d6e"},
        )
    assert (status, body) == (200, BODY)
    assert headers["x-total"] == "7"
    assert headers["content-type"] == "application/json"
    assert "x-trace" not in headers  # request headers are not echoed back
    (message,) = seen
    assert message.id == "0190f1a2-b3c4-d5e6-f708-192a3b4c5d6e"
    metadata = message.metadata
    assert metadata["x-trace"] == "abc"  # lower-cased
    assert metadata["http_method"] == "POST"
    assert metadata["http_path"] == "/orders"
    assert metadata["http_query"] == "debug=1"
    assert metadata["http_version"] == "HTTP/1.1"


def test_a_client_correlation_id_cannot_pick_another_request_s_reply() -> None:
    port = free_port()
    with serving(lambda m: m.with_payload(m.payload + b"!"), port):
        results: list[bytes] = []

        def one(n: int) -> None:
            headers = {"correlation_id": "same-for-everyone"}
            results.append(call(port, body=str(n).encode(), headers=headers)[2])

        threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert sorted(results) == sorted(f"{n}!".encode() for n in range(20))


def test_message_id_header_names_where_the_id_comes_from() -> None:
    seen: list[Message] = []
    port = free_port()
    with serving(lambda m: seen.append(m), port, message_id_header="X-Request-Id"):
        call(port, headers={"X-Request-Id": "0x2a"})
        call(port)
    assert seen[0].id == "00000000-0000-0000-0000-00000000002a"
    assert seen[1].id is not None and seen[1].id != seen[0].id


def test_ack_without_a_reply_is_202() -> None:
    port = free_port()
    with serving(lambda m: None, port):
        status, _, _ = call(port)
    assert status == 202


def test_a_route_ending_elsewhere_acks_with_202_and_delivers_the_message() -> None:
    port = free_port()
    topic = f"http-out-{port}"
    config = {"input": http_config(port), "output": {"memory": {"topic": topic}}}
    with Route.from_config(config), Consumer.from_config({"memory": {"topic": topic}}) as out:
        status, _, _ = call(port, headers={"message-id": "7"})
        batch = out.poll(max=10, timeout_ms=5000)
    assert status == 202
    assert [m.payload for m in batch] == [BODY]
    assert batch[0].id == "00000000-0000-0000-0000-000000000007"


def test_fire_and_forget_answers_202_before_the_handler_runs() -> None:
    release = threading.Event()
    handled: list[bytes] = []

    def handle(message: Message) -> None:
        release.wait(20)
        handled.append(message.payload)

    port = free_port()
    with serving(handle, port, fire_and_forget=True):
        status, _, _ = call(port)
        assert status == 202 and handled == []
        release.set()
        deadline = time.monotonic() + 20
        while not handled and time.monotonic() < deadline:
            time.sleep(0.01)
    assert handled == [BODY]


def test_no_outcome_within_request_timeout_is_504() -> None:
    release = threading.Event()
    port = free_port()
    with serving(lambda m: release.wait(20) and m, port, request_timeout_ms=200):
        try:
            status, _, body = call(port)
        finally:
            release.set()
    assert status == 504, body


# -- input: routing ---------------------------------------------------------------------


def test_routes_share_one_listener_by_path_and_method() -> None:
    port = free_port()
    orders = {"input": http_config(port, path="/orders", method="POST"), "output": {"response": {}}}
    orders_put = {"input": http_config(port, path="/orders", method="put")}
    users = {"input": http_config(port, path="/users"), "output": {"response": {}}}
    with (
        Route.from_config(orders).with_handler(lambda m: m.with_payload(b"orders")),
        Route.from_config({**orders_put, "output": {"response": {}}}).with_handler(
            lambda m: m.with_payload(b"put")
        ),
        Route.from_config(users).with_handler(lambda m: m.with_payload(b"users")),
    ):
        assert call(port, "/orders")[::2] == (200, b"orders")
        assert call(port, "/orders", method="PUT")[::2] == (200, b"put")
        assert call(port, "/users", method="GET", body=None)[::2] == (200, b"users")
        assert call(port, "/nobody")[0] == 404
        status, headers, _ = call(port, "/orders", method="DELETE")
        assert status == 405
        assert headers["allow"] == "POST, PUT"


def test_two_inputs_for_the_same_path_and_method_are_a_config_error() -> None:
    port = free_port()
    config = {"input": http_config(port, path="/a"), "output": {"response": {}}}
    with Route.from_config(config).with_handler(lambda m: m):
        with pytest.raises(ConfigError, match="already served"):
            Route.from_config(config).with_handler(lambda m: m).start()
        assert call(port, "/a")[0] == 200  # the first one still serves


def test_the_listener_closes_with_its_last_route_and_reopens() -> None:
    port = free_port()
    with serving(lambda m: m, port):
        assert call(port)[0] == 200
    with pytest.raises(OSError):
        call(port, timeout=2)
    with serving(lambda m: m, port):
        assert call(port)[0] == 200


# -- input: guards ------------------------------------------------------------------------


def test_concurrency_limit_answers_503_beyond_it() -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow(message: Message) -> Message:
        entered.set()
        release.wait(20)
        return message

    port = free_port()
    with serving(slow, port, concurrency_limit=1):
        first: list[int] = []
        thread = threading.Thread(target=lambda: first.append(call(port)[0]))
        thread.start()
        try:
            assert entered.wait(20)
            status, _, _ = call(port)
        finally:
            release.set()
            thread.join(20)
    assert status == 503
    assert first == [200]


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_basic_auth_401_says_nothing_about_which_part_was_wrong() -> None:
    port = free_port()
    with serving(lambda m: m, port, basic_auth=["alice", "s3cret"]):
        assert call(port, headers=_basic("alice", "s3cret"))[0] == 200
        missing = call(port)
        wrong_user = call(port, headers=_basic("bob", "s3cret"))
        wrong_password = call(port, headers=_basic("alice", "nope"))
        garbage = call(port, headers={"Authorization": "Bearer x"})
    for answer in (missing, wrong_user, wrong_password, garbage):
        assert answer[0] == 401
        assert answer[2] == missing[2]
        assert answer[1]["www-authenticate"].startswith("Basic")


def test_a_body_beyond_max_body_bytes_is_413_declared_or_chunked() -> None:
    seen: list[Message] = []
    port = free_port()
    with serving(lambda m: seen.append(m), port, max_body_bytes=1000):
        assert call(port, body=b"x" * 1000)[0] == 202
        assert call(port, body=b"x" * 1001)[0] == 413
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            chunks = iter([b"y" * 600, b"y" * 600])
            connection.request("POST", "/", body=chunks, encode_chunked=True)
            chunked = connection.getresponse().status
        finally:
            connection.close()
    assert chunked == 413
    assert [len(m.payload) for m in seen] == [1000]


def test_a_gzip_bomb_is_413_after_decompression() -> None:
    port = free_port()
    with serving(lambda m: m, port, max_body_bytes=10_000):
        bomb = gzip.compress(b"\0" * 1_000_000)
        status, _, _ = call(port, body=bomb, headers={"Content-Encoding": "gzip"})
    assert status == 413


def test_responses_are_gzipped_for_clients_that_accept_it() -> None:
    big = b"a" * 5000
    port = free_port()
    with serving(lambda m: m.with_payload(big), port, compression_enabled=True):
        status, headers, body = call(port, headers={"Accept-Encoding": "gzip"})
        plain = call(port)
        small = call(port, headers={"Accept-Encoding": "gzip"}, body=b"")
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert gzip.decompress(body) == big
    assert "content-encoding" not in plain[1] and plain[2] == big
    assert small[0] == 200


def test_custom_headers_are_added_to_responses() -> None:
    port = free_port()
    with serving(lambda m: m, port, custom_headers={"X-Served-By": "bridge"}):
        _, headers, _ = call(port)
    assert headers["x-served-by"] == "bridge"


def test_http2_only_is_refused_naming_the_option() -> None:
    config = {"input": http_config(free_port(), server_protocol="http2_only")}
    with pytest.raises(ConfigError, match="server_protocol"):
        Route.from_config({**config, "output": {"null": {}}}).start()


def test_options_are_checked() -> None:
    for bad in ({"path": "no-slash"}, {"method": "P O"}, {"compression": "zstd"}):
        with pytest.raises(ConfigError):
            Publisher.from_config(http_config(1, **bad))


# -- output -------------------------------------------------------------------------------


def test_send_posts_payload_id_and_metadata_to_an_http_input() -> None:
    port = free_port()
    topic = f"http-in-{port}"
    config = {"input": http_config(port, path="/in"), "output": {"memory": {"topic": topic}}}
    sent = [Message(b"m%d" % n, {"kind": "order", "n": str(n)}) for n in range(30)]
    target = {"http": {"url": f"http://127.0.0.1:{port}/in", "batch_concurrency": 4}}
    with (
        Route.from_config(config),
        Publisher.from_config(target) as publisher,
        Consumer.from_config({"memory": {"topic": topic}}) as out,
    ):
        publisher.send(sent[0])
        publisher.send_batch(sent[1:])
        received: list[Message] = []
        deadline = time.monotonic() + 20
        while len(received) < 30 and time.monotonic() < deadline:
            received += out.poll(max=100, timeout_ms=500)
    by_id = {m.id: m for m in received}
    assert set(by_id) == {m.assigned_id() for m in sent}
    for message in sent:
        got = by_id[message.assigned_id()]
        assert got.payload == message.payload
        assert got.metadata["kind"] == "order" and got.metadata["n"] == message.metadata["n"]


def test_request_returns_the_response_with_its_headers() -> None:
    port = free_port()
    handler = lambda m: m.with_payload(m.payload.upper()).with_metadata({"x-answer": "42"})  # noqa: E731
    with (
        serving(handler, port),
        Publisher.from_config({"http": {"url": f"http://127.0.0.1:{port}/"}}) as publisher,
    ):
        request = Message(b"hello", {"kind": "greeting"})
        reply = publisher.request(request)
    assert reply.payload == b"HELLO"
    assert reply.metadata["x-answer"] == "42"
    assert reply.metadata["http_status"] == "200"
    assert reply.id == request.id


def test_a_non_2xx_answer_is_a_retriable_error() -> None:
    port = free_port()
    with (
        serving(lambda m: m, port, path="/only"),
        Publisher.from_config({"http": {"url": f"http://127.0.0.1:{port}/elsewhere"}}) as publisher,
    ):
        with pytest.raises(Exception) as caught:
            publisher.send(Message(b"x"))
        assert getattr(caught.value, "retriable", False) is True
        assert "404" in str(caught.value)
        with pytest.raises(SendError) as partial:
            publisher.send_batch([Message(b"a"), Message(b"b")])
        assert sorted(partial.value.failures) == [0, 1]


def test_pass_through_status_returns_the_error_response() -> None:
    port = free_port()
    with (
        serving(lambda m: m, port, path="/only"),
        Publisher.from_config(
            {"http": {"url": f"http://127.0.0.1:{port}/x", "pass_through_status": True}}
        ) as publisher,
    ):
        reply = publisher.request(Message(b"x"))
    assert reply.metadata["http_status"] == "404"


def test_a_refused_connection_is_endpoint_unavailable() -> None:
    target = {"http": {"url": f"http://127.0.0.1:{free_port()}/"}}
    with Publisher.from_config(target) as publisher, pytest.raises(EndpointUnavailableError):
        publisher.send(Message(b"x"))


def test_basic_auth_custom_headers_and_gzip_travel_from_output_to_input() -> None:
    seen: list[Message] = []
    port = free_port()
    target = {
        "url": f"http://127.0.0.1:{port}/",
        "basic_auth": ["alice", "s3cret"],
        "custom_headers": {"X-Api-Key": "k1"},
        "compression_enabled": True,
        "compression_threshold_bytes": 10,
    }
    with serving(lambda m: seen.append(m) or m, port, basic_auth=["alice", "s3cret"]):
        with Publisher.from_config({"http": target}) as publisher:
            reply = publisher.request(Message(b"z" * 100))
        wrong_password = {"http": {**target, "basic_auth": ["alice", "x"]}}
        with Publisher.from_config(wrong_password) as wrong, pytest.raises(Exception, match="401"):
            wrong.send(Message(b"x"))
    assert reply.payload == b"z" * 100
    (message,) = seen
    assert message.payload == b"z" * 100  # decompressed by the server
    assert message.metadata["x-api-key"] == "k1"
    assert message.metadata["content-encoding"] == "gzip"


def test_a_consumer_polls_requests_and_commit_answers_them() -> None:
    port = free_port()
    with Consumer.from_config(http_config(port, path="/pull")) as consumer:
        answers: list[int] = []
        client = threading.Thread(target=lambda: answers.append(call(port, "/pull")[0]))
        client.start()
        batch: list[Message] = []
        deadline = time.monotonic() + 20
        while not batch and time.monotonic() < deadline:
            batch = consumer.poll(max=10, timeout_ms=200)
        consumer.commit()
        client.join(20)
    assert [m.payload for m in batch] == [BODY]
    assert answers == [202]


def test_http_and_websocket_inputs_share_one_port() -> None:
    from tests.mq_bridge.endpoints.test_websocket import client_exchange

    port = free_port()
    ws = {"input": {"websocket": {"url": f"127.0.0.1:{port}", "path": "/ws"}}}
    with (
        serving(lambda m: m.with_payload(b"http"), port, path="/api"),
        Route.from_config({**ws, "output": {"response": {}}}).with_handler(
            lambda m: m.with_payload(b"ws")
        ),
    ):
        assert call(port, "/api")[::2] == (200, b"http")
        assert client_exchange(f"ws://127.0.0.1:{port}/ws", ["x"], 1) == ["ws"]


def test_a_request_without_an_answer_in_time_is_a_retriable_timeout() -> None:
    release = threading.Event()
    port = free_port()
    with (
        serving(lambda m: release.wait(20) and m, port),
        Publisher.from_config(
            {"http": {"url": f"http://127.0.0.1:{port}/", "request_timeout_ms": 200}}
        ) as publisher,
    ):
        try:
            with pytest.raises(RequestTimeoutError) as caught:
                publisher.send(Message(b"x"))
        finally:
            release.set()
    assert caught.value.retriable


def test_a_handler_failure_that_is_not_retried_is_500() -> None:
    from mq_bridge import NonRetryableError

    def refuse(message: Message) -> Message:
        raise NonRetryableError("no such order")

    port = free_port()
    with serving(refuse, port):
        status, _headers, _body = call(port)
    assert status == 500  # answered when the route drops it (not 202, not a 504 timeout)


def test_a_failed_request_is_told_why_in_one_bounded_line() -> None:
    """The 500's body says what failed (a NonRetryableError's message, else the error's
    type and message), as plain text: never a traceback, never longer than the bound."""
    from mq_bridge import NonRetryableError
    from mq_bridge.endpoints.http.codec import MAX_FAILURE_TEXT

    def handle(message: Message) -> Message:
        order = message.json()
        if order.get("refuse"):
            raise NonRetryableError(f"order {order['id']} is refused")
        if order.get("long"):
            raise NonRetryableError("why\n" * 500)
        return message.with_json({"total": order["quantity"] * 2})  # KeyError without it

    port = free_port()
    with serving(handle, port):
        refused = call(port, body=b'{"id": 7, "refuse": true}')
        broken = call(port, body=b'{"id": 8}')
        long = call(port, body=b'{"id": 9, "long": true}')
        served = call(port, body=b'{"quantity": 2}')
    assert (refused[0], refused[2]) == (500, b"order 7 is refused")
    assert refused[1]["content-type"].startswith("text/plain")
    assert (broken[0], broken[2]) == (500, b"KeyError: 'quantity'")
    assert long[0] == 500 and len(long[2]) == MAX_FAILURE_TEXT and b"\n" not in long[2]
    assert long[2].startswith(b"why why") and long[2].endswith(b"...")
    assert served[:1] == (200,) and served[2] == b'{"total":4}'


_ONE_MESSAGE_SCRIPT = r"""
import asyncio, sys, threading
from aiohttp import web
from mq_bridge import Message, Publisher

def serve(ports, ready):
    async def main():
        async def accept(request):
            await request.read()
            return web.Response(text="ok")
        app = web.Application()
        app.router.add_post("/", accept)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports.append(site._server.sockets[0].getsockname()[1])
        ready.set()
        await asyncio.Event().wait()
    asyncio.run(main())

ports, ready = [], threading.Event()
threading.Thread(target=serve, args=(ports, ready), daemon=True).start()
ready.wait()
config = {"http": {"url": f"http://127.0.0.1:{ports[0]}/"}}

def send_and_forget():  # the publisher is collected unclosed when this returns
    Publisher.from_config(config).send(Message(b"hello"))

if sys.argv[1] == "close":
    publisher = Publisher.from_config(config)
    publisher.send(Message(b"hello"))
    publisher.close()
elif sys.argv[1] == "forget in a function":
    send_and_forget()
else:
    publisher = Publisher.from_config(config)
    publisher.send(Message(b"hello"))
print("sent")
"""


@pytest.mark.parametrize("ending", ["close", "forget in a function", "forget"])
def test_a_script_that_used_an_http_publisher_exits_silently(ending: str) -> None:
    """Closed or not, the aiohttp session is closed by the time the interpreter is done:
    nothing like "Unclosed client session" / "Unclosed connector" on stderr."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", _ONE_MESSAGE_SCRIPT, ending],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "sent\n"), done.stderr
    assert "Unclosed" not in done.stderr and "unclosed" not in done.stderr, done.stderr
