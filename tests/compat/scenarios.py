"""What a user of mq-bridge-py can observe, scenario by scenario, using its public API only.

This module runs in two interpreters — ours, and mq-bridge-py 0.3.2's own venv — so it
imports nothing but the standard library and `mq_bridge`, and every scenario returns plain
JSON data: return values, payload bytes, metadata, id shapes, the built-in exception classes
a raised error is an instance of (what ``except RuntimeError:`` code would catch), what
blocks and what returns. `observe.py` runs them all and prints the observations;
`test_compat.py` compares the two interpreters' observations.
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any

import mq_bridge
from mq_bridge import (
    Consumer,
    MemoryDrainer,
    Message,
    NonRetryableError,
    Publisher,
    RetryableError,
    Route,
)

Observation = dict[str, Any]
SCENARIOS: dict[str, Callable[[], Observation]] = {}

_BUILTIN_ERRORS = ("RuntimeError", "ValueError", "TypeError", "KeyError", "TimeoutError")


def scenario(function: Callable[[], Observation]) -> Callable[[], Observation]:
    SCENARIOS[function.__name__] = function
    return function


def outcome(call: Callable[[], Any]) -> Any:
    """What a call gives a user: its (normalized) value, or the built-in classes it raises."""
    try:
        value = call()
    except Exception as error:
        bases = [c.__name__ for c in type(error).__mro__ if c.__name__ in _BUILTIN_ERRORS]
        return {"raises": sorted(bases) or ["Exception"]}
    return normalize(value)


def normalize(value: Any) -> Any:
    if isinstance(value, Message):
        return {
            "payload": _text(value.payload),
            "metadata": value.metadata,
            "id": id_shape(value.id),
        }
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": _text(bytes(value))}
    if isinstance(value, dict):
        return {str(key): normalize(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"type": type(value).__name__}


def id_shape(value: Any) -> Any:
    if value is None:
        return None
    try:
        return f"uuid-v{uuid.UUID(str(value)).version}"
    except ValueError:
        return {"not-a-uuid": repr(value)}


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _topic(tag: str) -> str:
    return f"compat-{tag}-{uuid.uuid4().hex[:8]}"


def _publisher(topic: str) -> Publisher:
    return Publisher.from_config({"memory": {"topic": topic}})


def _signature(function: Any) -> list[str]:
    """Parameter names and defaults (what a caller can pass), without annotations."""
    parameters = inspect.signature(function).parameters.values()
    return [p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in parameters]


# --- Message -------------------------------------------------------------------------------

GIVEN_ID = "0190f5a4-0000-7000-8000-000000000000"


@scenario
def message_construction() -> Observation:
    return {
        "bytes": outcome(lambda: Message(b"x")),
        "bytearray": outcome(lambda: Message(bytearray(b"x")).payload),
        "memoryview": outcome(lambda: Message(memoryview(b"x")).payload),
        "str payload": outcome(lambda: Message("x")),  # type: ignore[arg-type]
        "int payload": outcome(lambda: Message(5)),  # type: ignore[arg-type]
        "metadata": outcome(lambda: Message(b"x", {"a": "b"})),
        "metadata int value": outcome(lambda: Message(b"x", {"a": 1})),  # type: ignore[dict-item]
        "given uuid": outcome(lambda: Message(b"x", None, GIVEN_ID).id),
        "given decimal": outcome(lambda: Message(b"x", id="5").id),
        "given hex": outcome(lambda: Message(b"x", id="0x10").id),
        "given int": outcome(lambda: Message(b"x", id=5).id),  # type: ignore[arg-type]
        "given text": outcome(lambda: id_shape(Message(b"x", id="order-42").id)),
        "keyword arguments": outcome(
            lambda: Message(payload=b"x", metadata={"k": "v"}, id=GIVEN_ID)
        ),
    }


@scenario
def message_readers() -> Observation:
    return {
        "json": outcome(lambda: Message(b'{"a": [1, 2.5, null]}').json()),
        "json not json": outcome(lambda: Message(b"nope").json()),
        "json not utf8": outcome(lambda: Message(b"\xff").json()),
        "text": outcome(lambda: Message("zoë".encode()).text()),
        "text not utf8": outcome(lambda: Message(b"\xff").text()),
        "metadata is a copy": outcome(lambda: _metadata_is_a_copy()),
        "from_json": outcome(lambda: Message.from_json({"b": [1, "x"]}, {"k": "v"})),
        "from_json id": outcome(lambda: Message.from_json({}, None, GIVEN_ID).id),
        "from_json unserializable": outcome(lambda: Message.from_json({1, 2})),
        "repr": outcome(lambda: repr(Message(b"xyz", {"a": "b"}, GIVEN_ID))),
        "repr new": outcome(lambda: repr(Message(b"", {}))),
        "equal twins": outcome(lambda: Message(b"x", {}, GIVEN_ID) == Message(b"x", {}, GIVEN_ID)),
    }


def _metadata_is_a_copy() -> Any:
    message = Message(b"", {"a": "b"})
    message.metadata["c"] = "d"
    return message.metadata


@scenario
def message_helpers() -> Observation:
    source = Message(b"{}", {"k": "v"}, GIVEN_ID)
    return {
        "with_json": outcome(lambda: source.with_json({"b": 2})),
        "with_payload": outcome(lambda: source.with_payload(b"z")),
        "with_payload str": outcome(lambda: source.with_payload("z")),  # type: ignore[arg-type]
        "with_json keeps id": outcome(lambda: source.with_json(1).id == GIVEN_ID),
        "new message has no id": outcome(lambda: Message(b"x").id),
        "from_json has no id": outcome(lambda: Message.from_json({}).id),
    }


# --- Publisher and Consumer over memory ------------------------------------------------------


@scenario
def publisher_sends() -> Observation:
    topic = _topic("send")
    publisher = _publisher(topic)
    observed = {
        "send message": outcome(lambda: publisher.send(Message(b"m", {"a": "b"}, GIVEN_ID))),
        "send bytes": outcome(lambda: publisher.send(b"raw")),
        "send bytes metadata": outcome(lambda: publisher.send(b"raw", {"a": "b"})),
        "send str": outcome(lambda: publisher.send("text")),  # type: ignore[arg-type]
        "send_json": outcome(lambda: publisher.send_json({"n": 1})),
        "send_json metadata id": outcome(lambda: publisher.send_json([1], {"kind": "k"}, GIVEN_ID)),
        "send_json unserializable": outcome(lambda: publisher.send_json({1, 2})),
        "send_json bad metadata": outcome(lambda: publisher.send_json({}, {"n": 1})),  # type: ignore[dict-item]
    }
    consumer = Consumer.from_config({"memory": {"topic": topic}})
    observed["received"] = outcome(lambda: consumer.poll(max=100, timeout_ms=500))
    sent = Message(b"late")
    publisher.send(sent)
    observed["id of a sent message afterwards"] = id_shape(sent.id)
    consumer.close()
    return observed


@scenario
def publisher_requests() -> Observation:
    topic = _topic("request")
    plain = _publisher(topic)
    response = Publisher.from_config({"response": {}})
    consumer = Consumer.from_config({"memory": {"topic": topic}})
    observed = {
        "memory without reply": outcome(lambda: plain.request(Message(b"q"))),
        "memory request was sent": outcome(
            lambda: [m.payload for m in consumer.poll(max=5, timeout_ms=300)]
        ),
        "response echoes": outcome(lambda: response.request(Message(b"hi", {"a": "b"}, GIVEN_ID))),
        "response echo id": outcome(lambda: response.request(Message(b"hi", {}, GIVEN_ID)).id),
        "response echo new message": outcome(lambda: response.request(b"raw", {"m": "v"})),
        "response request_json": outcome(lambda: response.request_json({"x": 1})),
        "response send": outcome(lambda: response.send(Message(b"x"))),
        "null request": outcome(
            lambda: Publisher.from_config({"null": None}).request(Message(b"q"))
        ),
        "static request payload": outcome(
            lambda: Publisher.from_config({"static": "hello"}).request(Message(b"q")).payload
        ),
    }
    consumer.close()
    return observed


@scenario
def publisher_metadata_beside_a_message() -> Observation:
    publisher = _publisher(_topic("meta"))
    response = Publisher.from_config({"response": {}})
    return {
        "send with metadata": outcome(lambda: publisher.send(Message(b"m"), {"x": "1"})),
        "send with {}": outcome(lambda: publisher.send(Message(b"m"), {})),
        "send with None": outcome(lambda: publisher.send(Message(b"m"), None)),
        "request with metadata": outcome(lambda: response.request(Message(b"m"), {"x": "1"})),
        "request with None": outcome(lambda: response.request(Message(b"m", {"a": "b"}), None)),
    }


@scenario
def consumer_polling() -> Observation:
    topic = _topic("poll")
    consumer = Consumer.from_config({"memory": {"topic": topic}})
    observed: Observation = {
        "poll empty": outcome(lambda: consumer.poll(max=10, timeout_ms=50)),
        "poll_batch empty": outcome(lambda: consumer.poll_batch(max=10, timeout_ms=50)),
        "commit nothing": outcome(consumer.commit),
        "nack nothing": outcome(consumer.nack),
        "ack None": outcome(lambda: consumer.ack(None)),  # type: ignore[arg-type]
        "exhausted": consumer.exhausted,
    }
    publisher = _publisher(topic)
    for number in range(10):
        publisher.send(str(number).encode())
    started = time.monotonic()
    observed["poll max 4 count"] = len(consumer.poll(max=4, timeout_ms=500))
    observed["poll with a backlog returned at once"] = time.monotonic() - started < 0.4
    consumer.commit()
    batch, token = consumer.poll_batch(max=3, timeout_ms=500)
    observed["poll_batch"] = {"count": len(batch), "token is int": isinstance(token, int)}
    consumer.nack(token)
    again, token = consumer.poll_batch(max=100, timeout_ms=500)
    observed["after nack, the batch comes again"] = [m.payload for m in again][: len(batch)] == [
        m.payload for m in batch
    ]
    observed["ack"] = outcome(lambda: consumer.ack(token))
    observed["poll after ack"] = outcome(lambda: consumer.poll(max=10, timeout_ms=50))
    return observed


@scenario
def consumer_status_and_close() -> Observation:
    topic = _topic("status")
    consumer = Consumer.from_config({"memory": {"topic": topic, "capacity": 7}})
    _publisher(topic).send(b"one")
    status = consumer.status()
    observed = {
        "status keys": sorted(status),
        "status": {key: status.get(key) for key in ("healthy", "pending", "capacity", "error")},
        "target is the topic": status.get("target") == topic,
        "details": status.get("details"),
        "close": outcome(consumer.close),
        "close again": outcome(consumer.close),
        "poll after close": outcome(lambda: consumer.poll(max=1, timeout_ms=10)),
        "status after close": outcome(consumer.status),
        "commit after close": outcome(consumer.commit),
    }
    with Consumer.from_config({"memory": {"topic": topic}}) as scoped:
        observed["context manager gives"] = type(scoped).__name__
    observed["closed by the with block"] = outcome(lambda: scoped.poll(max=1, timeout_ms=10))
    return observed


@scenario
def file_consumer_exhausts() -> Observation:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "events.jsonl")
        publisher = Publisher.from_config({"file": {"path": path}})
        for number in range(3):
            publisher.send_json({"n": number}, {"kind": "k"})
        del publisher  # mq-bridge-py has no close(); it closes on collection
        consumer = Consumer.from_config({"file": {"path": path}})
        seen: list[Any] = []
        for _ in range(5):
            batch = consumer.poll(max=10, timeout_ms=200)
            seen += [(m.json(), m.metadata) for m in batch]
            consumer.commit()
        return {"read": seen, "exhausted": consumer.exhausted}


@scenario
def memory_drainer() -> Observation:
    topic = _topic("drain")
    drainer = MemoryDrainer.from_topic(topic)
    publisher = _publisher(topic)
    for number in range(5):
        publisher.send_json({"n": number})
    return {
        "drain": outcome(lambda: drainer.drain(5, timeout=2.0)),
        "drain nothing with a timeout": outcome(lambda: drainer.drain(1, timeout=0.05)),
    }


# --- Route ----------------------------------------------------------------------------------


def _route(source: str, sink: str) -> Route:
    return Route.from_config(
        {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
    )


def _run_through(route: Route, source: str, sink: str, payloads: list[bytes]) -> Any:
    drained = Consumer.from_config({"memory": {"topic": sink}})
    publisher = _publisher(source)
    route.start()
    try:
        for payload in payloads:
            publisher.send(payload, {"kind": "order"})
        got: list[Message] = []
        deadline = time.monotonic() + 5
        while len(got) < len(payloads) and time.monotonic() < deadline:
            got += drained.poll(max=100, timeout_ms=100)
            drained.commit()
        got += drained.poll(max=100, timeout_ms=200)
        return [(m.payload, correlation_shape(m)) for m in got]
    finally:
        route.stop()
        route.join()
        drained.close()


def correlation_shape(message: Message) -> dict[str, str]:
    """`message`'s metadata, its ``correlation_id`` named when it is the message's own id in
    32 hex digits (what both peers put on a handler's results), so random ids compare."""
    metadata = message.metadata
    if message.id is not None and metadata.get("correlation_id") == uuid.UUID(message.id).hex:
        metadata["correlation_id"] = "<its id, 32 hex digits>"
    return metadata


@scenario
def route_handlers() -> Observation:
    def handler(message: Message) -> Any:
        data = message.json()
        if data == 1:
            return None  # dropped from the output
        if data == 2:
            return message.with_json({"two": True})
        if data == 3:
            return b"raw-bytes"
        return {"n": data}

    source, sink = _topic("rin"), _topic("rout")
    route = _route(source, sink).with_handler(handler)
    flowed = _run_through(route, source, sink, [b"1", b"2", b"3", b"4"])
    source2, sink2 = _topic("kin"), _topic("kout")
    kinds = _route(source2, sink2).add_handler("order", lambda data: {"seen": data})
    return {
        "with_handler results": normalize(flowed),
        "add_handler results": normalize(_run_through(kinds, source2, sink2, [b'{"a":1}'])),
    }


@scenario
def route_lifecycle() -> Observation:
    source, sink = _topic("lin"), _topic("lout")
    route = _route(source, sink)
    observed: Observation = {
        "with_handler chains": route.with_handler(lambda m: m) is route,
        "add_handler chains": route.add_handler("k", lambda d: d) is route,
        "with_handler not callable": outcome(lambda: route.with_handler(5)),  # type: ignore[arg-type]
        "start": outcome(route.start),
        "stop": outcome(route.stop),
        "join": outcome(route.join),
        "start again after stop": outcome(route.start),
    }
    route.stop()
    route.join()
    with _route(_topic("cin"), _topic("cout")) as scoped:
        observed["context manager gives"] = type(scoped).__name__
    return observed


@scenario
def route_handlers_while_running() -> Observation:
    route = _route(_topic("hin"), _topic("hout")).with_handler(lambda m: m)
    route.start()
    try:
        observed = {
            "with_handler": outcome(lambda: route.with_handler(lambda m: None)),
            "add_handler": outcome(lambda: route.add_handler("k", lambda d: d)),
        }
    finally:
        route.stop()
        route.join()
    observed["with_handler after stop"] = outcome(lambda: route.with_handler(lambda m: m) is route)
    observed["add_handler after stop"] = outcome(lambda: route.add_handler("k", dict) is route)
    return observed


def _precedence(build: Callable[[Route], Route], kind: str) -> Any:
    source, sink = _topic("pin"), _topic("pout")
    route = build(_route(source, sink))
    drained = Consumer.from_config({"memory": {"topic": sink}})
    publisher = _publisher(source)
    route.start()
    try:
        publisher.send(b"{}", {"kind": kind})
        got: list[Message] = []
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            got += drained.poll(max=10, timeout_ms=100)
        return [m.payload for m in got]
    finally:
        route.stop()
        route.join()
        drained.close()


@scenario
def route_handler_precedence() -> Observation:
    def raw(message: Message) -> bytes:
        return b"raw"

    def raw2(message: Message) -> bytes:
        return b"raw2"

    def kind1(data: Any) -> bytes:
        return b"kind1"

    def kind2(data: Any) -> bytes:
        return b"kind2"

    cases: dict[str, tuple[Callable[[Route], Route], str]] = {
        "raw after kind": (lambda r: r.add_handler("o", kind1).with_handler(raw), "o"),
        "kind after raw": (lambda r: r.with_handler(raw).add_handler("o", kind1), "o"),
        "kind after raw, another kind": (
            lambda r: r.with_handler(raw).add_handler("o", kind1),
            "x",
        ),
        "kind, raw, kind: the first kind": (
            lambda r: r.add_handler("o", kind1).with_handler(raw).add_handler("x", kind2),
            "o",
        ),
        "raw, kind, raw": (
            lambda r: r.with_handler(raw).add_handler("o", kind1).with_handler(raw2),
            "o",
        ),
        "two handlers of a kind": (
            lambda r: r.add_handler("o", kind1).add_handler("o", kind2),
            "o",
        ),
        "a kind without a handler": (lambda r: r.add_handler("o", kind1), "x"),
    }
    return {name: outcome(lambda c=case: _precedence(*c)) for name, case in cases.items()}


INPUT_IDS = [f"0190f5a4-0000-7000-8000-00000000000{n}" for n in range(4)]


def _correlated(build: Callable[[Route], Route], metadata: dict[str, str]) -> Any:
    """[payload, metadata, id] of each output of a memory route built by `build`, given a
    message of `metadata` with each of INPUT_IDS."""
    source, sink = _topic("cin"), _topic("cout")
    route = build(_route(source, sink))
    drained = Consumer.from_config({"memory": {"topic": sink}})
    publisher = _publisher(source)
    route.start()
    try:
        for given in INPUT_IDS:
            publisher.send(Message(b"1", metadata, given))
        got: list[Message] = []
        deadline = time.monotonic() + 5
        while len(got) < len(INPUT_IDS) and time.monotonic() < deadline:
            got += drained.poll(max=10, timeout_ms=100)
        return [[_text(m.payload), m.metadata, m.id] for m in got]
    finally:
        route.stop()
        route.join()
        drained.close()


def _handled_by(handler: Callable[[Message], Any]) -> Callable[[Route], Route]:
    return lambda route: route.with_handler(handler)


@scenario
def route_correlation() -> Observation:
    kind = {"kind": "order"}
    own_id = "0190f5a4-0000-7000-8000-0000000000aa"
    return {
        "no handler": outcome(lambda: _correlated(lambda route: route, kind)),
        "pass-through": outcome(lambda: _correlated(_handled_by(lambda m: m), kind)),
        "json result": outcome(lambda: _correlated(_handled_by(lambda m: {"n": 1}), kind)),
        "bytes result": outcome(lambda: _correlated(_handled_by(lambda m: b"b"), kind)),
        "with_json": outcome(lambda: _correlated(_handled_by(lambda m: m.with_json(2)), kind)),
        "new Message": outcome(lambda: _correlated(_handled_by(lambda m: Message(b"new")), kind)),
        "new Message with its own id": outcome(
            lambda: _correlated(_handled_by(lambda m: Message(b"new", {}, own_id)), kind)
        ),
        "input correlation_id": outcome(
            lambda: _correlated(_handled_by(lambda m: Message(b"n")), {"correlation_id": "c-1"})
        ),
        "result correlation_id": outcome(
            lambda: _correlated(
                _handled_by(lambda m: Message(b"n", {"correlation_id": "own"})),
                {"correlation_id": "c-1"},
            )
        ),
        "kind handler": outcome(
            lambda: _correlated(lambda route: route.add_handler("order", lambda d: [d]), kind)
        ),
    }


@scenario
def config_errors() -> Observation:
    with tempfile.TemporaryDirectory() as directory:
        missing = os.path.join(directory, "missing.yaml")
        return {
            "route empty": outcome(lambda: Route.from_config({})),
            "route bad option type": outcome(
                lambda: _start(Route.from_config({"input": {"memory": {"topic": 5}}}))
            ),
            "route unknown endpoint": outcome(
                lambda: _start(Route.from_config({"input": {"nope": {}}}))
            ),
            "publisher bad yaml": outcome(lambda: Publisher.from_str("a: [b")),
            "publisher missing file": outcome(lambda: Publisher.from_file(missing)),
            "consumer unknown name": outcome(
                lambda: Consumer.from_config({"consumers": {"a": {"memory": {"topic": "t"}}}}, "b")
            ),
        }


def _start(route: Route) -> None:
    route.start()
    route.stop()
    route.join()


@scenario
def route_from_a_one_route_document() -> Observation:
    text = "routes:\n  only:\n    input:\n      memory:\n        topic: t\n"
    document = {"routes": {"only": {"input": {"memory": {"topic": "t"}}}}}
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "routes.yaml")
        with open(path, "w") as file:
            file.write(text)
        return {
            "named": outcome(lambda: type(Route.from_file(path, "only")).__name__),
            "another name": outcome(lambda: Route.from_file(path, "other")),
            "without a name": {
                "from_file": outcome(lambda: type(Route.from_file(path)).__name__),
                "from_str": outcome(lambda: type(Route.from_str(text)).__name__),
                "from_config": outcome(lambda: type(Route.from_config(document)).__name__),
            },
        }


@scenario
def constructors() -> Observation:
    text = "memory:\n  topic: " + _topic("ctor") + "\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Publisher.from_yaml_str(text)
        Route.from_yaml_str("input:\n  memory:\n    topic: t\n")
    named = {"routes": {"orders": {"input": {"memory": {"topic": _topic("named")}}}}}
    return {
        "from_yaml_str warns": sorted({w.category.__name__ for w in caught}),
        "from_str": outcome(lambda: type(Publisher.from_str(text)).__name__),
        "from_config named route": outcome(
            lambda: type(Route.from_config(named, "orders")).__name__
        ),
    }


@scenario
def errors_and_signatures() -> Observation:
    return {
        "RetryableError bases": [c.__name__ for c in RetryableError.__mro__],
        "NonRetryableError bases": [c.__name__ for c in NonRetryableError.__mro__],
        "Consumer.poll": _signature(Consumer.poll),
        "Consumer.poll_batch": _signature(Consumer.poll_batch),
        "Consumer.ack": _signature(Consumer.ack),
        "Consumer.nack": _signature(Consumer.nack),
        "Publisher.send": _signature(Publisher.send),
        "Publisher.send_json": _signature(Publisher.send_json),
        "Publisher.request": _signature(Publisher.request),
        "Publisher.request_json": _signature(Publisher.request_json),
        "MemoryDrainer.drain": _signature(MemoryDrainer.drain),
        "MemoryDrainer.from_topic": _signature(MemoryDrainer.from_topic),
        "Route.from_config": _signature(Route.from_config),
        "Route.join": _signature(Route.join),
    }


# --- Middleware over a real HTTP server, and RabbitMQ ---------------------------------------


class _CookieServer:
    """A loopback HTTP/1.1 server (standard library): ``/login`` sets ``sid=abc``, ``/token``
    answers an ``x-token`` header; each request's headers are kept (names lower-cased)."""

    def __init__(self) -> None:
        import http.server
        import threading

        seen: list[dict[str, str]] = []

        class Answer(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # the standard library's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(200)
                if self.path == "/login":
                    self.send_header("Set-Cookie", "sid=abc; Path=/; HttpOnly")
                if self.path == "/token":
                    self.send_header("x-token", "T-123")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.seen = seen
        self.publishers: list[Publisher] = []
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def publisher(self, path: str, **jar: Any) -> Publisher:
        url = f"http://127.0.0.1:{self._server.server_address[1]}{path}"
        config = {"http": {"url": url}, "middlewares": [{"cookie_jar": jar}]}
        self.publishers.append(Publisher.from_config(config))
        return self.publishers[-1]

    def headers(self, name: str) -> list[str | None]:
        """Header `name` of each request so far; then they are forgotten."""
        seen, self.seen[:] = list(self.seen), []
        return [request.get(name) for request in seen]

    def close(self) -> None:
        for publisher in self.publishers:
            close = getattr(publisher, "close", None)  # mq-bridge-py 0.3.2 has none
            if close is not None:
                close()
        self._server.shutdown()
        self._server.server_close()


@scenario
def cookie_jar() -> Observation:
    server = _CookieServer()
    scope = _topic("scope")
    try:
        alone = server.publisher("/login")
        alone.send(Message(b"1"))
        alone.send(Message(b"2"))
        observed: Observation = {"one jar, two requests": server.headers("cookie")}
        login = server.publisher("/login", shared_scope=scope)
        api = server.publisher("/api", shared_scope=scope)
        login.send(Message(b"x"))
        api.send(Message(b"x"))
        server.publisher("/api", shared_scope=scope + "-other").send(Message(b"x"))
        server.publisher("/api").send(Message(b"x"))
        api.send(Message(b"x", {"cookie": "mine=1"}))
        api.send(Message(b"x"))
        observed["shared scope, another scope, none, explicit"] = server.headers("cookie")
        token = server.publisher(
            "/token", shared_scope=scope, capture_metadata_keys=["x-token"],
            export_metadata_prefix="jar.",
        )  # fmt: skip
        reply = token.request(Message(b"login"))
        observed["reply exports"] = {k: v for k, v in reply.metadata.items() if "jar." in k}
        injecting = server.publisher(
            "/api", shared_scope=scope, inject_metadata={"x-auth": "x-token"}
        )
        injecting.send(Message(b"x"))
        injecting.send(Message(b"x", {"x-auth": "own"}))
        observed["injected"] = server.headers("x-auth")[-2:]
        return observed
    finally:
        server.close()


@scenario
def cookie_jar_in_memory() -> Observation:
    scope, topic = _topic("scope"), _topic("jar")
    jar = {"cookie_jar": {"shared_scope": scope, "export_metadata_prefix": "s."}}
    publisher = Publisher.from_config({"memory": {"topic": topic}, "middlewares": [jar]})
    publisher.send(b"a", {"set-cookie": "sid=abc; Path=/"})
    publisher.send(b"b", {"cookie": "lang=en"})
    publisher.send(b"c")
    consumer = Consumer.from_config({"memory": {"topic": topic}})
    got = consumer.poll(max=10, timeout_ms=1000)
    consumer.close()
    return {"sent metadata": [m.metadata for m in got]}


@scenario
def amqp_broadcast() -> Observation:
    """The seed's broadcast mode: three subscribers and a publisher of one subscribe_mode
    config. Needs RabbitMQ: `test_compat.py` names the URL and a unique queue (and deletes
    what it declares); without them, nothing to observe."""
    url, name = os.environ.get("MQB_COMPAT_AMQP_URL"), os.environ.get("MQB_COMPAT_AMQP_NAME")
    if not url or not name:
        return {"skipped": "MQB_COMPAT_AMQP_URL and MQB_COMPAT_AMQP_NAME are not set"}
    config = {"amqp": {"url": url, "queue": name, "subscribe_mode": True}}
    subscribers = [Consumer.from_config(config) for _ in range(3)]
    for subscriber in subscribers:
        subscriber.poll(max=1, timeout_ms=300)  # subscribed before anything is published
    publisher = Publisher.from_config(config)
    for number in range(3):
        publisher.send(Message(f"m{number}".encode()))
    received = []
    for subscriber in subscribers:
        got: list[str] = []
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            got += [_text(m.payload) for m in subscriber.poll(max=10, timeout_ms=200)]
            subscriber.commit()
        received.append(got)
        subscriber.close()
    return {"each subscriber received": received}


# --- Config types and schema ----------------------------------------------------------------


@scenario
def config_module() -> Observation:
    import mq_bridge.config as config

    names = sorted(name for name in dir(config) if name[:1].isupper())
    return {"typed dict names": names}


@scenario
def schema_shape() -> Observation:
    schema = mq_bridge.config_schema()
    defs = schema.get("$defs", {})
    return {
        "top-level keys": sorted(schema),
        "$schema": schema.get("$schema"),
        "root": {
            key: value for key, value in schema.items() if key not in ("$defs", "description")
        },
        "root type": schema.get("type"),
        "$defs present": sorted(defs),
        "Route properties": sorted(defs.get("Route", {}).get("properties", {})),
        "MemoryConfig properties": sorted(defs.get("MemoryConfig", {}).get("properties", {})),
        "FileConfig properties": sorted(defs.get("FileConfig", {}).get("properties", {})),
        "serializable": bool(json.dumps(schema)),
    }
