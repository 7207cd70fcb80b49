"""${VAR} and ${VAR:-default} in config values."""

from __future__ import annotations

import pytest

from mq_bridge.config.env import expand_env
from mq_bridge.config.loader import load_route
from mq_bridge.errors import ConfigError

ENV = {"HOST": "db.local", "PORT": "5432", "EMPTY": ""}


def test_expands_values_anywhere_in_the_tree_but_not_keys() -> None:
    config = {"${HOST}": "x", "url": "pg://${HOST}:${PORT}/app", "list": ["${PORT}", 7]}
    expansion = expand_env(config, environ=ENV)
    assert expansion.value == {"${HOST}": "x", "url": "pg://db.local:5432/app", "list": ["5432", 7]}
    assert expansion.problems == []
    assert expansion.expanded_paths == {("list", 0)}  # only whole-value placeholders


def test_defaults_and_empty_values() -> None:
    expansion = expand_env(
        {"a": "${NOPE:-fallback}", "b": "${EMPTY:-x}", "c": "${NOPE:-}"}, environ=ENV
    )
    assert expansion.value == {"a": "fallback", "b": "", "c": ""}


def test_double_dollar_escapes_a_placeholder() -> None:
    expansion = expand_env({"a": "$${HOST} is ${HOST}"}, environ=ENV)
    assert expansion.value == {"a": "${HOST} is db.local"}


def test_unset_variables_are_problems_naming_path_and_variable() -> None:
    expansion = expand_env({"input": {"x": ["${A}", "${B}/${HOST}"]}}, ("routes", "r"), ENV)
    assert expansion.problems == [
        "routes.r.input.x[0]: environment variable A is not set",
        "routes.r.input.x[1]: environment variable B is not set",
    ]


def test_the_source_is_not_changed() -> None:
    config = {"a": ["${HOST}"]}
    expand_env(config, environ=ENV)
    assert config == {"a": ["${HOST}"]}


def test_route_options_from_the_environment_become_numbers_and_booleans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MQB_TEST_TOPIC", "1234")
    monkeypatch.setenv("MQB_TEST_BATCH", "64")
    monkeypatch.setenv("MQB_TEST_FAULTS", "true")
    route = load_route(
        (
            "str",
            "input: {memory: {topic: '${MQB_TEST_TOPIC}'}}\n"
            "batch_size: ${MQB_TEST_BATCH}\n"
            "allow_fault_injection: ${MQB_TEST_FAULTS}\n"
            "concurrency: ${MQB_TEST_UNSET:-3}\n",
        ),
        None,
    )
    assert route["input"]["memory"]["topic"] == "1234"  # a string option stays a string
    assert route["batch_size"] == 64
    assert route["allow_fault_injection"] is True
    assert route["concurrency"] == 3


def test_an_unset_variable_fails_loading_with_one_clear_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MQB_TEST_UNSET", raising=False)
    doc = {
        "routes": {"r": {"input": {"memory": {"topic": "t"}}, "batch_size": "${MQB_TEST_UNSET}"}}
    }
    with pytest.raises(ConfigError) as caught:
        load_route(("config", doc), "r")
    assert caught.value.problems == [
        "routes.r.batch_size: environment variable MQB_TEST_UNSET is not set"
    ]


def test_a_non_numeric_value_still_fails_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQB_TEST_BATCH", "lots")
    with pytest.raises(ConfigError, match="batch_size: must be an integer, got 'lots'"):
        load_route(
            ("config", {"input": {"memory": {"topic": "t"}}, "batch_size": "${MQB_TEST_BATCH}"}),
            None,
        )
