"""`validate` checks every limit `run` does: "valid" means the route starts.

Each limit lives in its option's declaration; for the twain endpoint's topic settings the
bounds are checked against the engine's own (`twainmq.config.TopicConfig`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from mq_bridge.config.declarations import MAX_INT64, MAX_MILLISECONDS, MAX_SECONDS
from mq_bridge.config.loader import validate_document
from mq_bridge.endpoints.twain.options import (
    KEY_TYPE_PATTERN,
    TopicSettings,
    TwainOptions,
    open_store,
)
from mq_bridge.errors import EndpointError
from twainmq import Twain
from twainmq.config import TopicConfig
from twainmq.errors import TwainMQError
from twainmq.keys import parse_key_type

NAN, INF = math.nan, math.inf


def twain(**create: Any) -> dict[str, Any]:
    return {
        "input": {"memory": {"topic": "in"}},
        "output": {"twain": {"root": "/tmp/never-opened", "topic": "t", "create": create}},
    }


def output(endpoint: dict[str, Any], **route: Any) -> dict[str, Any]:
    return {"input": {"memory": {"topic": "in"}}, "output": endpoint, **route}


def middleware(name: str, **options: Any) -> dict[str, Any]:
    return output({"memory": {"topic": "out"}, "middlewares": [{name: options}]})


TOPIC = "output.twain.create"
#: (config, the path of its one problem, what the problem says)
BAD_CONFIGS = [
    (twain(partitions=70_000), f"{TOPIC}.partitions", "must be <= 65536, got 70000"),
    (twain(partitions=0), f"{TOPIC}.partitions", "must be >= 1, got 0"),
    (twain(key_type="char999"), f"{TOPIC}.key_type", "charN with N from 1 to 255"),
    (twain(key_type="char256"), f"{TOPIC}.key_type", "charN with N from 1 to 255"),
    (twain(key_type="char0"), f"{TOPIC}.key_type", "charN with N from 1 to 255"),
    (twain(key_type="u128"), f"{TOPIC}.key_type", "must be u8, u16, u32, u64 or charN"),
    (twain(retention_seconds=NAN), f"{TOPIC}.retention_seconds", "finite number"),
    (twain(retention_seconds=INF), f"{TOPIC}.retention_seconds", "finite number"),
    (twain(retention_seconds=-1), f"{TOPIC}.retention_seconds", "must be >= 0"),
    (twain(segment_bytes=(1 << 31) + 1), f"{TOPIC}.segment_bytes", "must be <= 2147483648"),
    (twain(segment_bytes=1023), f"{TOPIC}.segment_bytes", "must be >= 1024"),
    (twain(max_message_bytes=(1 << 29) + 1), f"{TOPIC}.max_message_bytes", "<= 536870912"),
    (twain(retention_bytes=(1 << 62) + 1), f"{TOPIC}.retention_bytes", f"<= {1 << 62}"),
    (
        output({"twain": {"root": "/r", "topic": "t", "session_timeout_ms": 2**40}}),
        "output.twain.session_timeout_ms",
        f"must be <= {MAX_MILLISECONDS}",
    ),
    (
        output({"memory": {"topic": "t", "send_timeout_ms": 10**20}}),
        "output.memory.send_timeout_ms",
        f"must be <= {MAX_MILLISECONDS}",
    ),
    (
        output({"file": {"path": "x", "linger_ms": 10**400}}),
        "output.file.linger_ms",
        f"must be <= {MAX_MILLISECONDS}",
    ),
    (
        output({"memory": {"topic": "t"}}, startup_timeout_ms=2**31),
        "startup_timeout_ms",
        f"must be <= {MAX_MILLISECONDS}",
    ),
    (
        middleware("limiter", messages_per_second=INF),
        "output.middlewares[0].limiter.messages_per_second",
        "finite number",
    ),
    (
        middleware("limiter", messages_per_second=NAN),
        "output.middlewares[0].limiter.messages_per_second",
        "finite number",
    ),
    (middleware("retry", multiplier=INF), "output.middlewares[0].retry.multiplier", "finite"),
    (middleware("retry", jitter=NAN), "output.middlewares[0].retry.jitter", "finite number"),
    (
        middleware("retry", max_interval_ms=2**31),
        "output.middlewares[0].retry.max_interval_ms",
        f"must be <= {MAX_MILLISECONDS}",
    ),
    (
        middleware("delay", delay_ms=2**31),
        "output.middlewares[0].delay.delay_ms",
        f"must be <= {MAX_MILLISECONDS}",
    ),
    (
        middleware("buffer", max_messages=10, max_delay_ms=2**31),
        "output.middlewares[0].buffer.max_delay_ms",
        f"must be <= {MAX_MILLISECONDS}",
    ),
    (
        {
            "input": {
                "memory": {"topic": "in"},
                "middlewares": [{"deduplication": {"ttl_seconds": 10**400}}],
            },
            "output": {"memory": {"topic": "out"}},
        },
        "input.middlewares[0].deduplication.ttl_seconds",
        f"must be <= {MAX_SECONDS}",
    ),
    (
        output({"mqtt": {"url": "mqtt://h:1883", "topic": "t", "keep_alive_seconds": 70_000}}),
        "output.mqtt.keep_alive_seconds",
        "must be <= 65535",
    ),
    (
        output({"redis_streams": {"url": "redis://h", "stream": "s", "maxlen": MAX_INT64 + 1}}),
        "output.redis_streams.maxlen",
        f"must be <= {MAX_INT64}",
    ),
]


@pytest.mark.parametrize(
    ("config", "path", "message"), BAD_CONFIGS, ids=[case[1] for case in BAD_CONFIGS]
)
def test_validate_reports_each_limit_with_its_path(
    config: dict[str, Any], path: str, message: str
) -> None:
    problems = validate_document(("config", config))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}: "), problems
    assert message in problems[0]


def test_limits_hold_in_yaml_too() -> None:
    document = (
        "input: {memory: {topic: in}}\n"
        "output: {twain: {root: /r, topic: t, create: {retention_seconds: .nan,"
        " partitions: 70000, key_type: char999}}}\n"
    )
    assert [line.split(": ")[0] for line in validate_document(("str", document))] == [
        f"{TOPIC}.key_type",
        f"{TOPIC}.partitions",
    ]  # the schema's problems first; the declaration's (NaN) once they are fixed
    fixed = document.replace(" partitions: 70000, key_type: char999", "")
    assert validate_document(("str", fixed)) == [
        f"{TOPIC}.retention_seconds: Input should be a finite number"
    ]


# --- the twain endpoint's topic settings are the engine's --------------------------------

#: setting -> (lowest, highest) the declaration allows; None: no bound.
BOUNDS: dict[str, tuple[Any, Any]] = {
    "partitions": (1, 1 << 16),
    "max_message_bytes": (1, 1 << 29),
    "segment_bytes": (1024, 1 << 31),
    "retention_bytes": (0, 1 << 62),
    "retention_seconds": (0, None),
}


def engine_accepts(**settings: Any) -> bool:
    try:
        TopicConfig("t", **settings)
    except TwainMQError:
        return False
    return True


def declaration_accepts(**settings: Any) -> bool:
    try:
        TopicSettings.model_validate(settings)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_topic_setting_bounds_are_the_engines(name: str) -> None:
    low, high = BOUNDS[name]
    assert declaration_accepts(**{name: low}) and engine_accepts(**{name: low})
    assert not declaration_accepts(**{name: low - 1})
    assert not engine_accepts(**{name: low - 1})
    if high is not None:
        assert declaration_accepts(**{name: high}) and engine_accepts(**{name: high})
        assert not declaration_accepts(**{name: high + 1})
        assert not engine_accepts(**{name: high + 1})


@pytest.mark.parametrize("value", [NAN, INF, -INF])
def test_retention_seconds_must_be_finite(value: float) -> None:
    assert not declaration_accepts(retention_seconds=value)


def key_type_candidates() -> list[str]:
    digits = [f"{n}" for n in range(1000)] + [f"{n:02}" for n in range(100)]
    digits += [f"{n:03}" for n in range(1000)] + ["0000", "0001", "1000", ""]
    return ["u8", "u16", "u32", "u64", "u0", "u128", "U8", "char", *(f"char{d}" for d in digits)]


def test_the_key_type_pattern_is_exactly_the_engines() -> None:
    for candidate in key_type_candidates():
        try:
            parse_key_type(candidate)
            engine = True
        except TwainMQError:
            engine = False
        declared = re.fullmatch(KEY_TYPE_PATTERN.strip("^$"), candidate) is not None
        assert declared == engine == declaration_accepts(key_type=candidate), candidate


def test_valid_topic_settings_create_the_topic(tmp_path: Path) -> None:
    settings = {
        "partitions": 1 << 16,
        "key_type": "char255",
        "max_message_bytes": 1 << 29,
        "segment_bytes": 1 << 31,
        "retention_bytes": 1 << 62,
        "retention_seconds": 1e12,
    }
    config = output({"twain": {"root": str(tmp_path), "topic": "t", "create": settings}})
    assert validate_document(("config", config)) == []
    options = TwainOptions.model_validate(config["output"]["twain"])
    open_store(options)
    assert Twain(tmp_path).topic_exists("t")


def test_what_the_engine_refuses_the_declaration_refuses_first(tmp_path: Path) -> None:
    """The other way round: a value built past the declaration is what `run` fails on."""
    too_many = TopicSettings.model_construct(partitions=70_000)
    options = TwainOptions.model_construct(
        root=str(tmp_path), topic="t", create=too_many, group=None
    )
    with pytest.raises(EndpointError, match="partitions 70000 must be an integer from 1"):
        open_store(options)
    with pytest.raises(ValueError, match="less than or equal to 65536"):
        TopicSettings.model_validate({"partitions": 70_000})
