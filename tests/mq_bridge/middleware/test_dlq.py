from __future__ import annotations

import datetime

import pytest

from mq_bridge.config.declarations import parse_options
from mq_bridge.endpoints.base import BuildContext
from mq_bridge.errors import ConfigError, NonRetryableError, RetryableError, SendError
from mq_bridge.middleware import dlq, retry
from mq_bridge.middleware.dlq import DeadLetterFailedError, DeadLetterOptions
from mq_bridge.middleware.retry import RetryOptions

from .endpoints import ListOutput, context_with, numbered

TO_DEAD = DeadLetterOptions(endpoint={"list": "dead"})


def build(inner: ListOutput, dead: ListOutput):
    return dlq.wrap_output(inner, TO_DEAD, context_with({"dead": dead}))


def test_non_retriable_failures_are_dead_lettered_with_the_reason_and_the_batch_is_handled():
    inner = ListOutput(
        lambda m, a: NonRetryableError("no such customer") if m.json()["n"] == 1 else None
    )
    dead = ListOutput()
    messages = numbered(3)
    build(inner, dead).send(messages)
    assert [m.json()["n"] for m in inner.sent] == [0, 2]
    (letter,) = dead.sent
    assert letter.id == messages[1].id and letter.payload == messages[1].payload
    meta = letter.metadata
    assert meta["mqb.dlq.error"] == "no such customer"
    assert meta["mqb.dlq.error_type"] == "NonRetryableError"
    assert meta["mqb.dlq.route"] == "orders"
    assert meta["mqb.dlq.attempts"] == "1"
    assert meta["mqb.dlq.endpoint"] == "list-output"
    assert datetime.datetime.fromisoformat(meta["mqb.dlq.failed_at"]).tzinfo is not None


def test_retriable_failures_are_passed_on_not_dead_lettered():
    inner = ListOutput(lambda m, a: RetryableError("busy") if m.json()["n"] == 0 else None)
    dead = ListOutput()
    with pytest.raises(SendError) as raised:
        build(inner, dead).send(numbered(2))
    assert list(raised.value.failures) == [0] and raised.value.retriable
    assert dead.sent == []


def test_a_whole_batch_that_failed_for_good_is_dead_lettered():
    inner = ListOutput(lambda m, a: ValueError("not json"), whole_batch=True)
    dead = ListOutput()
    build(inner, dead).send(numbered(3))
    assert [m.metadata["mqb.dlq.error_type"] for m in dead.sent] == ["ValueError"] * 3


def test_with_retry_inside_it_gets_the_attempt_count_and_the_original_error():
    inner = ListOutput(lambda m, a: RetryableError("still down"))
    dead = ListOutput()
    context = context_with({"dead": dead})
    retried = retry.wrap_output(inner, RetryOptions(max_attempts=3, initial_interval_ms=1), context)
    dlq.wrap_output(retried, TO_DEAD, context).send(numbered(1))
    (letter,) = dead.sent
    assert letter.metadata["mqb.dlq.attempts"] == "3"
    assert letter.metadata["mqb.dlq.error"] == "still down"
    assert letter.metadata["mqb.dlq.error_type"] == "RetryableError"


def test_when_the_dead_letter_endpoint_fails_the_messages_stay_retriable():
    inner = ListOutput(lambda m, a: NonRetryableError("bad"))
    dead = ListOutput(lambda m, a: OSError("disk full"))
    with pytest.raises(SendError) as raised:
        build(inner, dead).send(numbered(2))
    assert raised.value.retriable
    assert all(isinstance(e, DeadLetterFailedError) for e in raised.value.failures.values())
    assert "disk full" in str(raised.value.failures[0])


def test_close_closes_both_endpoints():
    inner, dead = ListOutput(), ListOutput()
    build(inner, dead).close()
    assert inner.closed and dead.closed


def test_a_missing_endpoint_is_a_config_error():
    with pytest.raises(ConfigError, match=r"dlq\.endpoint"):
        no_endpoint = parse_options(DeadLetterOptions, {"endpoint": {}}, "dlq")
        dlq.wrap_output(ListOutput(), no_endpoint, context_with({}))
    with pytest.raises(ConfigError, match=r"dlq\.endpoint"):
        unbuildable = DeadLetterOptions(endpoint={"x": 1})
        dlq.wrap_output(ListOutput(), unbuildable, BuildContext(route_name="r"))
