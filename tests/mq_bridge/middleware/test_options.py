"""Each middleware declares its options once (`OPTIONS`); parsing fills defaults and checks."""

from __future__ import annotations

import importlib

import pytest

from mq_bridge.config.declarations import Options, parse_options, schema_fragment
from mq_bridge.errors import ConfigError
from mq_bridge.middleware.deduplication import DeduplicationOptions
from mq_bridge.middleware.dlq import DeadLetterOptions
from mq_bridge.middleware.registry import MIDDLEWARE_MODULES
from mq_bridge.middleware.retry import RetryOptions
from mq_bridge.middleware.weak_join import WeakJoinOptions


@pytest.mark.parametrize("name", sorted(MIDDLEWARE_MODULES))
def test_every_middleware_exports_one_declaration_and_no_hand_written_schema(name):
    module = importlib.import_module(MIDDLEWARE_MODULES[name])
    assert issubclass(module.OPTIONS, Options)
    assert {"OPTIONS", module.OPTIONS.__name__} <= set(module.__all__)
    assert not hasattr(module, "SCHEMA")
    fragment = schema_fragment(module.OPTIONS)
    assert fragment["additionalProperties"] is False and fragment["description"]
    assert set(fragment["properties"]) == set(module.OPTIONS.model_fields)
    assert all(field.description for field in module.OPTIONS.model_fields.values())


def test_defaults_are_filled_by_parsing():
    assert parse_options(RetryOptions, {}).model_dump() == {
        "max_attempts": 3,
        "initial_interval_ms": 100,
        "max_interval_ms": 5000,
        "multiplier": 2.0,
        "jitter": 0.2,
    }
    join = parse_options(WeakJoinOptions, {"group_by": "k", "expected_count": 2, "timeout_ms": 0})
    assert (join.branch_by, join.required, join.on_timeout, join.ack) == (
        None,
        (),
        "fire",
        "on_join",
    )


def test_a_cap_below_the_first_wait_is_refused_even_when_the_cap_is_the_default():
    with pytest.raises(ConfigError, match=r"^retry: max_interval_ms \(5000\) is below"):
        parse_options(RetryOptions, {"initial_interval_ms": 10_000}, "retry")


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"store": "redis://x"}, "deduplication.store: unsupported store 'redis://x'"),
        ({"store": "sqlite://"}, "deduplication.store: sqlite:// needs a file path"),
        ({"key": "payload"}, "deduplication.key: unknown key 'payload'"),
    ],
)
def test_deduplication_store_and_key_are_checked_when_parsed(options, problem):
    with pytest.raises(ConfigError) as raised:
        parse_options(DeduplicationOptions, {"ttl_seconds": 1, **options}, "deduplication")
    assert str(raised.value).startswith(problem)


def test_dlq_needs_an_endpoint_and_an_empty_group_key_is_refused():
    with pytest.raises(ConfigError, match=r"^dlq\.endpoint: needs an output endpoint"):
        parse_options(DeadLetterOptions, {"endpoint": {}}, "dlq")
    with pytest.raises(ConfigError, match=r"^weak_join\.group_by: "):
        parse_options(
            WeakJoinOptions, {"group_by": "", "expected_count": 1, "timeout_ms": 0}, "weak_join"
        )
