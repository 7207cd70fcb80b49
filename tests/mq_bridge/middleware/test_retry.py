from __future__ import annotations

import random
import threading

import pytest

from mq_bridge.config.declarations import parse_options
from mq_bridge.errors import (
    ConfigError,
    EndpointUnavailableError,
    NonRetryableError,
    RetryableError,
    SendError,
)
from mq_bridge.middleware import dlq, retry
from mq_bridge.middleware.dlq import DeadLetterOptions
from mq_bridge.middleware.retry import Backoff, RetriesExhaustedError, RetryOptions

from .endpoints import ListOutput, context_with, numbered

FAST = {"initial_interval_ms": 1, "max_interval_ms": 2}


def wrap(output: ListOutput, **options: object):
    parsed = parse_options(RetryOptions, {**FAST, **options}, "retry")
    return retry.wrap_output(output, parsed, context_with({}))


def test_retriable_failures_are_retried_until_they_pass() -> None:
    output = ListOutput(lambda m, attempt: RetryableError("busy") if attempt < 3 else None)
    wrap(output, max_attempts=3).send(numbered(4))
    assert sorted(m.json()["n"] for m in output.sent) == [0, 1, 2, 3]
    assert set(output.attempts.values()) == {3}


def test_only_the_failed_messages_are_sent_again() -> None:
    def fail_odd_once(message, attempt):
        return RetryableError("busy") if message.json()["n"] % 2 and attempt == 1 else None

    output = ListOutput(fail_odd_once)
    wrap(output).send(numbered(6))
    assert [m.json()["n"] for m in output.sent] == [0, 2, 4, 1, 3, 5]
    assert output.calls == 2


def test_after_the_last_attempt_messages_fail_for_good_with_their_original_index() -> None:
    output = ListOutput(lambda m, a: RetryableError("down") if m.json()["n"] == 2 else None)
    with pytest.raises(SendError) as raised:
        wrap(output, max_attempts=4).send(numbered(3))
    (index, error), *rest = raised.value.failures.items()
    assert (index, rest) == (2, [])
    assert isinstance(error, RetriesExhaustedError)
    assert error.attempts == 4 and not error.retriable
    assert isinstance(error.last_error, RetryableError)
    assert output.calls == 4


def test_non_retriable_failures_are_not_retried() -> None:
    output = ListOutput(lambda m, a: NonRetryableError("bad") if m.json()["n"] == 0 else None)
    with pytest.raises(SendError) as raised:
        wrap(output, max_attempts=5).send(numbered(2))
    assert isinstance(raised.value.failures[0], NonRetryableError)
    assert output.calls == 1


def test_a_whole_batch_failure_is_retried_too() -> None:
    output = ListOutput(
        lambda m, attempt: EndpointUnavailableError("refused") if attempt == 1 else None,
        whole_batch=True,
    )
    wrap(output).send(numbered(3))
    assert len(output.sent) == 3 and output.calls == 2


def test_backoff_grows_by_the_multiplier_up_to_the_cap() -> None:
    backoff = Backoff(0.1, 0.5, 2.0, jitter=0.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 4)] == [0.1, 0.2, 0.4, 0.5]


def test_jitter_only_shortens_the_wait_by_up_to_its_fraction() -> None:
    backoff = Backoff(1.0, 1.0, 2.0, jitter=0.5, rng=random.Random(7))
    delays = [backoff.delay(1) for _ in range(200)]
    assert all(0.5 <= d <= 1.0 for d in delays)
    assert max(delays) - min(delays) > 0.3


def test_closing_during_a_backoff_hands_messages_back_still_retriable() -> None:
    output = ListOutput(lambda m, a: RetryableError("busy"))
    slow = RetryOptions(initial_interval_ms=60_000, max_interval_ms=60_000)
    wrapped = retry.wrap_output(output, slow, context_with({}))
    wrapped.close()
    with pytest.raises(SendError) as raised:
        wrapped.send(numbered(1))
    assert raised.value.retriable and output.calls == 1


def test_bad_intervals_are_a_config_error_naming_the_option() -> None:
    problem = r"^retry: max_interval_ms \(100\) is below initial_interval_ms \(500\)$"
    with pytest.raises(ConfigError, match=problem):
        wrap(ListOutput(), initial_interval_ms=500, max_interval_ms=100)


def test_retry_outside_a_dlq_is_refused_with_the_right_order() -> None:
    dead = ListOutput()
    context = context_with({"dead": dead})
    inner = dlq.wrap_output(ListOutput(), DeadLetterOptions(endpoint={"list": "dead"}), context)
    with pytest.raises(ConfigError, match=r"\[dlq, retry\]"):
        retry.wrap_output(inner, RetryOptions(), context)


def test_the_routes_stop_event_ends_a_backoff_and_hands_messages_back_retriable() -> None:
    context = context_with({})
    context.stopping = threading.Event()  # type: ignore[attr-defined]
    output = ListOutput(lambda m, a: RetryableError("busy"))
    slow = RetryOptions(initial_interval_ms=600_000, max_interval_ms=600_000)
    wrapped = retry.wrap_output(output, slow, context)
    outcome: list[SendError] = []

    def send() -> None:
        try:
            wrapped.send(numbered(1))
        except SendError as error:
            outcome.append(error)

    sender = threading.Thread(target=send)
    sender.start()
    context.stopping.set()  # type: ignore[attr-defined]
    sender.join(timeout=60)
    assert not sender.is_alive()
    assert outcome[0].retriable and output.calls == 1


def test_the_backoff_stays_capped_after_thousands_of_retries():
    from mq_bridge.middleware.retry import Backoff

    backoff = Backoff(initial=0.1, maximum=5.0, multiplier=2.0, jitter=0.0)
    assert backoff.delay(1) == 0.1
    assert backoff.delay(5000) == 5.0  # 2.0 ** 4999 overflows a float: still the cap
