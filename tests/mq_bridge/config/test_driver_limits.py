"""`validate` refuses what the native drivers cannot take, so that "valid" means `run` starts.

The drivers take C strings, which end at the first NUL character: a value with one is cut
short without a word, or becomes one the driver never expected. A Kafka ``group_id`` of
``"\\0"`` is an empty group id, and librdkafka then aborts the whole process (SIGABRT, no
Python error). One rule in the declaration base (`mq_bridge.config.declarations.Options`)
refuses a NUL in every string of every endpoint's and middleware's options, and a string
that is not UTF-8 text (a lone surrogate); these tests go through every such option of every
registered endpoint and middleware, found from the declarations themselves, so an option
added later is covered without a line here.
"""

from __future__ import annotations

import json
import signal
import time
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel

from mq_bridge.config.declarations import Options
from mq_bridge.config.loader import validate_document
from mq_bridge.config.problems import format_path
from mq_bridge.config.schema import catalog
from tests.mq_bridge.cli.helpers import cli, run_child

NUL = "a\0b"

#: A valid config of each endpoint, the starting point for one bad option at a time.
ENDPOINTS: dict[str, dict[str, Any]] = {
    "amqp": {"url": "amqp://127.0.0.1:5672/", "queue": "q"},
    "aws": {"queue_url": "http://127.0.0.1:5000/123456789012/q", "region": "us-east-1"},
    "custom": {"name": "mine"},
    "file": {"path": "/tmp/never-opened.jsonl"},
    "grpc": {"url": "127.0.0.1:50051"},
    "http": {"url": "127.0.0.1:8080"},
    "ibmmq": {"url": "127.0.0.1(1414)", "queue_manager": "QM1", "channel": "DEV", "queue": "Q"},
    "kafka": {"url": "127.0.0.1:9092", "topic": "orders"},
    "memory": {"topic": "orders"},
    "mongodb": {"url": "mongodb://127.0.0.1:27017/", "database": "shop", "collection": "c"},
    "mqtt": {"url": "tcp://127.0.0.1:1883", "topic": "orders"},
    "nats": {"url": "nats://127.0.0.1:4222", "subject": "orders"},
    "null": {},
    "redis": {"url": "redis://127.0.0.1:6379", "channel": "orders"},
    "redis_streams": {"url": "redis://127.0.0.1:6379", "stream": "orders"},
    "response": {},
    "sled": {"path": "/tmp/never-opened-sled"},
    "sqlx": {"url": "postgresql://127.0.0.1:5432/shop", "table": "orders"},
    "stream_buffer": {"topic": "orders"},
    "switch": {"metadata_key": "kind", "cases": {"a": {"null": {}}}},
    "twain": {"root": "/tmp/never-opened-twain", "topic": "orders"},
    "websocket": {"url": "127.0.0.1:8081"},
    "zeromq": {"url": "tcp://127.0.0.1:5555"},
}
#: Endpoints whose options are one value, not an option set: nothing there reaches a driver.
ROOT_VALUES = {
    "fanout": "a list of nested endpoints, each checked by its own declaration",
    "reader": "a nested endpoint, checked by its own declaration",
    "ref": "the name of a route or endpoint in the same document, never given to a driver",
    "static": "the message body, which is data (NUL allowed)",
}
MIDDLEWARES: dict[str, dict[str, Any]] = {
    "buffer": {"max_messages": 10, "max_delay_ms": 10},
    "cookie_jar": {},
    "custom": {"name": "mine"},
    "deduplication": {"ttl_seconds": 60},
    "delay": {"delay_ms": 1},
    "dlq": {"endpoint": {"null": {}}},
    "limiter": {"messages_per_second": 10},
    "metrics": {},
    "random_panic": {},
    "retry": {},
    "weak_join": {"group_by": "order", "expected_count": 2, "timeout_ms": 1000},
}
#: A valid value of a nested option set that a list holds (its required options).
NESTED: dict[str, dict[str, Any]] = {"WhenCase": {"if": "true", "to": {"null": {}}}}


OptionPath = tuple[str | int, ...]


def _bad_values(annotation: Any, bad: str) -> list[tuple[Any, OptionPath]]:
    """Values of type `annotation`, each with `bad` in one of its strings, and the path of
    that string: one for each place a string can stand."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is str:
        return [(bad, ())]
    if origin is Annotated:
        return _bad_values(args[0], bad)
    found: list[tuple[Any, OptionPath]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            if _is_exempt(annotation, name, bad):
                continue
            key = field.alias or name
            base = {k: v for k, v in NESTED.get(annotation.__name__, {}).items() if k != key}
            for value, below in _bad_values(field.annotation, bad):
                found.append(({**base, key: value}, (key, *below)))
        return found
    if origin in (typing.Union, types.UnionType):
        return [case for arg in args for case in _bad_values(arg, bad)]
    if origin is dict:
        return [({"k": value}, ("k", *below)) for value, below in _bad_values(args[1], bad)]
    if origin is list:
        return [([value], (0, *below)) for value, below in _bad_values(args[0], bad)]
    if origin is tuple:
        items = args[:1] if args[-1:] == (...,) else args
        for index, arg in enumerate(items):
            for value, below in _bad_values(arg, bad):
                row: list[Any] = ["x"] * len(items)
                row[index] = value
                found.append((row, (index, *below)))
        return found
    return []  # Any (a user's own config), numbers, booleans, Literal choices


def _is_exempt(model: type[BaseModel], name: str, bad: str) -> bool:
    return "\0" in bad and issubclass(model, Options) and name in model.NUL_ALLOWED


def bad_options(
    kind: Literal["endpoints", "middlewares"], bad: str
) -> list[tuple[str, dict[str, Any], OptionPath]]:
    """(name, options with `bad` in one string, the path of that string in the options) for
    every string option of every registered endpoint or middleware."""
    bases = ENDPOINTS if kind == "endpoints" else MIDDLEWARES
    cases = []
    for name, plugin in sorted(getattr(catalog(), kind).items()):
        if name in ROOT_VALUES and kind == "endpoints":
            continue
        model = plugin.options
        for option, field in model.model_fields.items():
            if _is_exempt(model, option, bad):
                continue
            key = field.alias or option
            # a nested endpoint is a dict[str, Any]: none here (its own declaration has them)
            for value, below in _bad_values(field.annotation, bad):
                cases.append((name, {**bases[name], key: value}, (key, *below)))
    return cases


def _route(kind: str, name: str, options: dict[str, Any]) -> dict[str, Any]:
    if kind == "middlewares":
        side = "output" if catalog().middlewares[name].can_output else "input"
        wrapped = {"memory": {"topic": side}, "middlewares": [{name: options}]}
        route = {"input": {"memory": {"topic": "in"}}, side: wrapped}
        return {**route, "allow_fault_injection": True}  # random_panic asks for it
    if catalog().endpoints[name].can_input:
        return {"input": {name: options}}
    return {"input": {"memory": {"topic": "in"}}, "output": {name: options}}


def _where(route: str, kind: str, name: str, option: OptionPath) -> str:
    """The path `validate` reports for `option` of the endpoint or middleware `name`."""
    if kind == "middlewares":
        side = "output" if catalog().middlewares[name].can_output else "input"
        return format_path(("routes", route, side, "middlewares", 0, name, *option))
    side = "input" if catalog().endpoints[name].can_input else "output"
    return format_path(("routes", route, side, name, *option))


def test_every_registered_endpoint_and_middleware_has_a_valid_config_here() -> None:
    plugins = catalog()
    assert sorted(ENDPOINTS) == sorted(set(plugins.endpoints) - set(ROOT_VALUES))
    assert sorted(MIDDLEWARES) == sorted(plugins.middlewares)
    for kind, bases in (("endpoints", ENDPOINTS), ("middlewares", MIDDLEWARES)):
        document = {"routes": {name: _route(kind, name, base) for name, base in bases.items()}}
        assert validate_document(("config", document)) == []


@pytest.mark.parametrize("kind", ["endpoints", "middlewares"])
def test_a_nul_in_any_string_option_is_refused_at_its_path(kind: str) -> None:
    cases = bad_options(kind, NUL)  # type: ignore[arg-type]
    assert len(cases) > (60 if kind == "endpoints" else 3)  # the walk found the options
    unrefused = []
    for name, options, option in cases:
        document = {"routes": {"r": _route(kind, name, options)}}
        problems = validate_document(("config", document))
        expected = f"{_where('r', kind, name, option)}: "
        if not any(problem.startswith(expected) for problem in problems):
            unrefused.append((f"{name}.{option}", problems))
        else:
            assert len(problems) == 1, problems
            # the rule's words, or a schema pattern's (which shows the value) said first
            assert (
                "NUL character (\\x00, at index 1)" in problems[0] or "got 'a\\x00b'" in problems[0]
            )
    assert unrefused == []


def test_the_options_that_may_hold_a_nul_are_data_not_driver_settings() -> None:
    document = {
        "routes": {
            "static": {"input": {"static": {"body": NUL, "metadata": {"k": NUL}}}},
            "zeromq": {"input": {"zeromq": {"url": "tcp://127.0.0.1:5555", "topic": "\0\1"}}},
            "custom": {"input": {"custom": {"name": "mine", "config": {"key": NUL}}}},
        }
    }
    assert validate_document(("config", document)) == []


def test_a_nul_in_a_key_is_refused_too() -> None:
    output = {"http": {"url": "http://127.0.0.1:8080/", "custom_headers": {"x-id\0": "1"}}}
    document = {"routes": {"r": {"input": {"memory": {"topic": "in"}}, "output": output}}}
    [problem] = validate_document(("config", document))
    assert problem.startswith("routes.r.output.http.custom_headers: the key 'x-id\\x00' must")


def test_a_lone_surrogate_is_refused_at_its_path() -> None:
    cases = bad_options("endpoints", "a\udc80b")
    assert len(cases) > 60
    for name, options, option in cases:
        problems = validate_document(
            ("config", {"routes": {"r": _route("endpoints", name, options)}})
        )
        expected = f"{_where('r', 'endpoints', name, option)}: "
        assert any(problem.startswith(expected) for problem in problems), (name, option, problems)


def test_mq_bridge_validate_lists_every_nul_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    routes, expected = {}, []
    kinds: tuple[Literal["endpoints", "middlewares"], ...] = ("endpoints", "middlewares")
    for kind in kinds:
        for index, (name, options, option) in enumerate(bad_options(kind, NUL)):
            route = f"{kind[0]}{index}"
            routes[route] = _route(kind, name, options)
            expected.append(f"{_where(route, kind, name, option)}: ")
    config = tmp_path / "bridge.json"
    config.write_text(json.dumps({"routes": routes}))  # JSON spells a NUL as \u0000
    code, out, err = cli(capsys, "validate", str(config))
    assert code == 1, out
    assert f"{len(expected)} problems" in err.splitlines()[0]
    listed = [line.strip() for line in err.splitlines()[1:]]
    for line in expected:
        assert any(problem.startswith(line) for problem in listed), line


KAFKA_GROUP_NUL = """\
routes:
  orders:
    input:
      kafka: {url: "127.0.0.1:9092", topic: orders, group_id: "\\0"}
"""


def test_run_with_a_nul_kafka_group_id_exits_with_an_error_not_sigabrt(tmp_path: Path) -> None:
    """librdkafka asserts on the empty group id that "\\0" becomes, killing the process with
    SIGABRT; now `run` refuses the config before any driver sees it."""
    (tmp_path / "bridge.yaml").write_text(KAFKA_GROUP_NUL)
    result = run_child("run", "bridge.yaml", "--stop-when-idle", "1", cwd=tmp_path, timeout=60)
    assert result.returncode != -signal.SIGABRT, result.stderr
    assert result.returncode == 1, result.stderr
    assert "routes.orders.input.kafka.group_id: must not contain a NUL character" in result.stderr
    assert "Traceback" not in result.stderr


LONG_LABEL = "x" * 64  # a DNS label is at most 63 characters: the idna codec refuses it
#: (endpoint options, the path of the one problem, what it says): values that validated
#: and then failed `run` inside a client library (an internal error, or a hang).
DRIVER_REFUSALS = [
    # botocore's InvalidRegionError when the client is made
    ({"aws": {"queue_url": "http://127.0.0.1:5000/1/q", "region": "us east 1"}},
     "input.aws.region", "not an AWS region name"),
    ({"aws": {"queue_url": "http://127.0.0.1:5000/1/q", "region": "x" * 64}},
     "input.aws.region", "not an AWS region name"),
    ({"aws": {"queue_url": "http://127.0.0.1:5000/1/q", "region": "12345"}},
     "input.aws.region", "not an AWS region name"),
    # UnicodeError from the idna codec as the listener binds or the client connects
    ({"http": {"url": f"{LONG_LABEL}.example:8080"}}, "input.http.url", "too long"),
    ({"http": {"url": "127.0.0.1:8080", "path": "/p"}, "out": {
        "http": {"url": f"http://{LONG_LABEL}.example/"}}}, "output.http.url", "too long"),
    ({"websocket": {"url": f"ws://{LONG_LABEL}:8081/p"}}, "input.websocket.url", "too long"),
    ({"mqtt": {"url": "tcp://a..b:1883", "topic": "t"}}, "input.mqtt.url", "label empty"),
    ({"mqtt": {"url": f"tcp://{LONG_LABEL}:1883", "topic": "t"}}, "input.mqtt.url", "too long"),
    # a request line no server takes (400): the sends were retried for ever
    ({"http": {"url": "127.0.0.1:8080", "method": "X" * 70_000}},
     "input.http.method", "longer than 32 letters"),
]  # fmt: skip


@pytest.mark.parametrize(("endpoint", "where", "says"), DRIVER_REFUSALS)
def test_values_a_client_library_fails_on_are_refused(
    endpoint: dict[str, Any], where: str, says: str
) -> None:
    endpoint = dict(endpoint)
    output = endpoint.pop("out", None)
    route = {"input": endpoint, **({"output": output} if output else {})}
    if output:
        route["input"] = {"memory": {"topic": "in"}}
    [problem] = validate_document(("config", {"routes": {"r": route}}))
    assert problem.startswith(f"routes.r.{where}: ") and says in problem, problem


def test_the_same_values_spelled_well_are_valid() -> None:
    routes = {
        "aws": {
            "input": {"aws": {"queue_url": "http://127.0.0.1:5000/1/q", "region": "eu-west-3"}}
        },
        "http": {"input": {"http": {"url": f"{'x' * 63}.example:8080", "method": "PATCH"}}},
        "mqtt": {"input": {"mqtt": {"url": "tcp://broker.example.:1883", "topic": "t"}}},
        "ws": {"input": {"websocket": {"url": "ws://[::1]:8081/p"}}},
    }
    assert validate_document(("config", {"routes": routes})) == []


def test_a_long_value_is_refused_quickly() -> None:
    """An error message shows the value through the URL-password redaction, whose pattern
    scanned a long run of letters again from each of them (70,000: 12 s)."""
    started = time.monotonic()
    endpoint = {"http": {"url": "127.0.0.1:8080", "method": "X" * 70_000}}
    problems = validate_document(("config", {"routes": {"r": {"input": endpoint}}}))
    assert problems and time.monotonic() - started < 2.0
