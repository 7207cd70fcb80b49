"""Property tests for the bookkeeping middleware relies on: ack order and failure indexes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mq_bridge.errors import NonRetryableError, RetryableError, SendError
from mq_bridge.middleware import retry
from mq_bridge.middleware._ordered_acks import OrderedAcks
from mq_bridge.middleware.retry import RetryOptions

from .endpoints import ListInput, ListOutput, context_with, numbered


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_ordered_acks_reach_an_ordered_input_in_receive_order(data):
    count = data.draw(st.integers(1, 12))
    source = ListInput(numbered(count))
    acks = OrderedAcks(source)
    pending = [acks.handed_out(source.receive(1, 0)) for _ in range(count)]
    order = data.draw(st.permutations(range(count)))
    outcomes = data.draw(st.lists(st.booleans(), min_size=count, max_size=count))
    for index in order:
        (acks.done if outcomes[index] else acks.failed)(pending[index])
    assert len(source.acked) + len(source.nacked) == count and acks.open_batches == 0
    assert source.acked == [p.batch.messages[0] for p, ok in zip(pending, outcomes) if ok]


@settings(max_examples=100, deadline=None)
@given(
    plan=st.lists(st.sampled_from(["ok", "retry-once", "retry-always", "fatal"]), max_size=10),
    attempts=st.integers(1, 4),
)
def test_retry_delivers_or_reports_each_message_exactly_once_at_its_index(plan, attempts):
    messages = numbered(len(plan))
    kind = {m.id: p for m, p in zip(messages, plan)}

    def fail(message, attempt):
        wanted = kind[message.id]
        if wanted == "fatal":
            return NonRetryableError("fatal")
        if wanted == "retry-always" or (wanted == "retry-once" and attempt == 1):
            return RetryableError("busy")
        return None

    output = ListOutput(fail)
    options = RetryOptions(max_attempts=attempts, initial_interval_ms=0, max_interval_ms=0)
    failures: dict[int, BaseException] = {}
    try:
        retry.wrap_output(output, options, context_with({})).send(messages)
    except SendError as error:
        failures = error.failures
    delivered = {m.id for m in output.sent}
    assert len(delivered) == len(output.sent)  # nothing sent twice
    for index, message in enumerate(messages):
        assert (message.id in delivered) != (index in failures)
        expected_ok = plan[index] == "ok" or (plan[index] == "retry-once" and attempts > 1)
        assert (message.id in delivered) == expected_ok
