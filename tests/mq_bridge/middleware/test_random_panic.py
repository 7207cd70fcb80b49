from __future__ import annotations

import pytest

from mq_bridge.errors import (
    ConfigError,
    EndpointUnavailableError,
    RetryableError,
    SendError,
    SendTimeoutError,
)
from mq_bridge.middleware import random_panic
from mq_bridge.middleware.random_panic import NOT_JSON, InjectedPanicError, RandomPanicOptions

from .endpoints import ListInput, ListOutput, context_with, numbered

ALLOWED = context_with({}, allow_fault_injection=True)


def test_refuses_to_build_without_allow_fault_injection():
    off = RandomPanicOptions(enabled=False)
    with pytest.raises(ConfigError, match="allow_fault_injection"):
        random_panic.wrap_output(ListOutput(), RandomPanicOptions(), context_with({}))
    with pytest.raises(ConfigError, match="allow_fault_injection"):
        random_panic.wrap_input(ListInput([]), off, context_with({}))


@pytest.mark.parametrize(
    ("mode", "error_type", "retriable"),
    [
        ("panic", InjectedPanicError, False),
        ("disconnect", EndpointUnavailableError, True),
        ("timeout", SendTimeoutError, True),
    ],
)
def test_whole_call_modes_fail_the_send_holding_the_nth_message(mode, error_type, retriable):
    output = ListOutput()
    wrapped = random_panic.wrap_output(
        output, RandomPanicOptions(mode=mode, trigger_on_message=3), ALLOWED
    )
    wrapped.send(numbered(2))
    with pytest.raises(error_type) as raised:
        wrapped.send(numbered(2))
    assert raised.value.retriable is retriable
    wrapped.send(numbered(2))  # it triggers once
    assert len(output.sent) == 4


@pytest.mark.parametrize(
    ("mode", "error_type"), [("json_format_error", ValueError), ("nack", RetryableError)]
)
def test_per_message_modes_fail_only_that_message(mode, error_type):
    output = ListOutput()
    wrapped = random_panic.wrap_output(
        output, RandomPanicOptions(mode=mode, trigger_on_message=2), ALLOWED
    )
    with pytest.raises(SendError) as raised:
        wrapped.send(numbered(3))
    assert list(raised.value.failures) == [1]
    assert isinstance(raised.value.failures[1], error_type)
    assert [m.json()["n"] for m in output.sent] == [0, 2]


def test_without_a_trigger_every_message_fails():
    wrapped = random_panic.wrap_output(ListOutput(), RandomPanicOptions(mode="nack"), ALLOWED)
    with pytest.raises(SendError) as raised:
        wrapped.send(numbered(3))
    assert sorted(raised.value.failures) == [0, 1, 2]


def test_disabled_passes_everything_through():
    output = ListOutput()
    random_panic.wrap_output(output, RandomPanicOptions(enabled=False), ALLOWED).send(numbered(2))
    assert len(output.sent) == 2


def test_input_nacks_before_raising_so_nothing_is_lost():
    messages = numbered(3)
    source = ListInput(messages)
    options = RandomPanicOptions(mode="disconnect", trigger_on_message=1)
    wrapped = random_panic.wrap_input(source, options, ALLOWED)
    with pytest.raises(EndpointUnavailableError):
        wrapped.receive(10, 0)
    assert source.nacked == messages
    assert wrapped.receive(10, 0).messages == messages


def test_input_nack_mode_hands_out_an_empty_batch_and_redelivers():
    messages = numbered(2)
    source = ListInput(messages)
    wrapped = random_panic.wrap_input(
        source, RandomPanicOptions(mode="nack", trigger_on_message=2), ALLOWED
    )
    assert wrapped.receive(10, 0).messages == []
    assert wrapped.receive(10, 0).messages == messages


def test_input_json_format_error_corrupts_that_payload():
    wrapped = random_panic.wrap_input(
        ListInput(numbered(2)),
        RandomPanicOptions(mode="json_format_error", trigger_on_message=2),
        ALLOWED,
    )
    batch = wrapped.receive(10, 0)
    assert batch.messages[1].payload == NOT_JSON
    with pytest.raises(ValueError, match="not"):
        batch.messages[1].json()
