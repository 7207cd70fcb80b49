"""The contract every endpoint keeps, checked on the endpoint objects themselves.

A live case's input is opened before its output, and when its send returns only once the
input settled it (`settles_sends`), the sends run on a thread of their own
(`sending.sending`) while the test receives and settles.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from mq_bridge import Message
from mq_bridge.endpoints.base import Batch, InputEndpoint, OutputEndpoint
from tests.mq_bridge.contract.cases import ContractCase
from tests.mq_bridge.contract.sending import sending
from tests.mq_bridge.helpers import open_input, open_output

STATUS_KEYS = {"healthy", "target", "pending", "capacity", "error", "details"}


def open_pair(case: ContractCase) -> tuple[OutputEndpoint, InputEndpoint]:
    """(output, input); a live case's input first, so that something listens."""
    if case.live:
        source = open_input(case.input_config, "contract")
        return open_output(case.output_config, "contract"), source
    return open_output(case.output_config, "contract"), open_input(case.input_config, "contract")


def receive_n(
    source: InputEndpoint, count: int, timeout: float = 10.0, ack: bool = False
) -> list[Batch]:
    """Batches until `count` messages arrived (or `timeout` passed); each acked as it
    comes with `ack` (a send that waits for its outcome needs that to go on)."""
    batches: list[Batch] = []
    deadline = time.monotonic() + timeout
    while sum(len(b) for b in batches) < count and time.monotonic() < deadline:
        batch = source.receive(count - sum(len(b) for b in batches), 0.2)
        if batch:
            batches.append(batch)
            if ack:
                source.ack(batch)
    return batches


def messages_of(batches: list[Batch]) -> list[Message]:
    return [m for b in batches for m in b.messages]


def sample(count: int) -> list[Message]:
    return [Message(f"m{i}".encode(), {"n": str(i), "kind": "test"}) for i in range(count)]


def sent_and_received(case: ContractCase) -> tuple[list[Message], list[Message]]:
    """Five messages sent as a batch of three, one `send_one` and a batch of one."""
    sent = sample(5)
    output, source = open_pair(case)
    calls = (
        lambda: output.send(sent[:3]),
        lambda: output.send_one(sent[3]),
        lambda: output.send([sent[4]]),
        output.flush,
    )
    with sending(case, *calls):
        got = messages_of(receive_n(source, 5, ack=True))
    output.close()
    source.close()
    return sent, got


def test_what_is_sent_is_received_in_order_with_its_payload(case):
    sent, got = sent_and_received(case)
    assert [m.payload for m in got] == [m.payload for m in sent]


def test_ids_arrive_with_their_messages(case):
    case.require("ids")
    sent, got = sent_and_received(case)
    assert [(m.id, m.payload) for m in got] == [(m.id, m.payload) for m in sent]


def test_metadata_arrives_as_sent(case):
    case.require("metadata")
    sent, got = sent_and_received(case)
    assert [(m.metadata, m.payload) for m in got] == [(m.metadata, m.payload) for m in sent]


def test_acked_messages_are_not_delivered_again(case):
    case.require("resume")
    output = open_output(case.output_config, "contract")
    output.send(sample(4))
    output.flush()
    source = open_input(case.input_config, "contract")
    first = receive_n(source, 2)
    for batch in first:
        source.ack(batch)
    source.close()
    again = open_input(case.input_config, "contract")
    if case.resumes_after_acks:
        rest = messages_of(receive_n(again, 2))
        assert [m.payload for m in rest] == [b"m2", b"m3"]
    else:  # no progress is kept across readers: a new one starts over, acked ones included
        rest = messages_of(receive_n(again, 4))
        assert [m.payload for m in rest] == [b"m0", b"m1", b"m2", b"m3"]
    again.close()
    output.close()


def test_a_nacked_batch_is_delivered_again_in_order(case):
    case.require("redelivery")
    if not case.redelivers_on_nack:
        pytest.skip("this endpoint redelivers on the next run, not at once")
    output, source = open_pair(case)
    output.send(sample(3))
    output.flush()
    batches = receive_n(source, 3)
    for batch in reversed(batches):
        source.nack(batch)
    again = messages_of(receive_n(source, 3))
    assert [m.payload for m in again] == [b"m0", b"m1", b"m2"]
    output.close()
    source.close()


def test_a_nack_fails_the_send_that_waits_for_it(case):
    """Where a send returns only once the input settled it, a nack reaches the sender: its
    send raises (an ack lets it return, as every other test here shows)."""
    if not case.settles_sends:
        pytest.skip("the send returned when the message was handed over: a nack cannot reach it")
    output, source = open_pair(case)
    with sending(case, lambda: output.send_one(Message(b"refused"))) as sends:
        sends.may_fail = True
        batch = source.receive(1, 10.0)
        assert [m.payload for m in batch.messages] == [b"refused"]
        source.nack(batch)
    assert len(sends.errors) == 1 and isinstance(sends.errors[0], Exception)
    output.close()
    source.close()


def test_receive_returns_an_empty_batch_when_nothing_arrives(case):
    source = open_input(case.input_config, "contract")
    assert not source.receive(10, 0.05)
    source.close()


def test_receive_never_returns_more_than_asked(case):
    output, source = open_pair(case)
    with sending(case, lambda: output.send(sample(7)), output.flush) as sends:
        sends.may_fail = True  # closing the input fails a send still waiting for the rest
        batch = source.receive(3, 5.0)
        assert 1 <= len(batch) <= 3
        source.ack(batch)
        source.close()
    output.close()


def test_exhausted_only_for_bounded_sources_once_everything_was_handed_out(case):
    output, source = open_pair(case)
    with sending(case, lambda: output.send(sample(2)), output.close):
        assert not source.exhausted or case.bounded
        receive_n(source, 2, ack=True)
    source.receive(10, 0.05)
    assert source.exhausted is case.bounded
    source.close()


def test_status_has_the_documented_shape(case):
    for endpoint in open_pair(case):
        status = endpoint.status().as_dict()
        assert set(status) == STATUS_KEYS
        assert status["healthy"] is True
        assert isinstance(status["target"], str) and status["target"]
        assert status["pending"] is None or status["pending"] >= 0
        assert isinstance(status["details"], dict)
        endpoint.close()


def test_close_is_idempotent_and_use_after_close_raises(case):
    output, source = open_pair(case)
    output.close()
    output.close()
    source.close()
    source.close()
    with pytest.raises(RuntimeError, match="closed"):
        output.send(sample(1))
    with pytest.raises(RuntimeError, match="closed"):
        source.receive(1, 0.01)


#: A receive the tests expect to end at once is given this long: it must end long before.
LONG_TIMEOUT = 30.0
#: How long a test waits for such a receive before calling it hung (a guard, not a bound).
HANG_GUARD = 10.0


def start_receive(source: InputEndpoint, timeout: float) -> Callable[[], Batch]:
    """Start ``source.receive(1, timeout)`` on a thread of its own; return once the thread
    is about to call it. The function returned waits for the batch, and fails when the
    receive is still waiting after `HANG_GUARD` seconds (one that waits out a
    `LONG_TIMEOUT` missed what should have ended it)."""
    result: list[Batch] = []
    started = threading.Event()

    def run() -> None:
        started.set()
        result.append(source.receive(1, timeout))

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    started.wait()

    def finish() -> Batch:
        reader.join(HANG_GUARD)
        hung = reader.is_alive()
        if hung:  # let it end (at its timeout) before the test closes the endpoint under it
            reader.join()
        assert not hung, f"receive still waiting after {HANG_GUARD}s"
        return result[0]

    return finish


def test_an_interrupt_before_receive_ends_that_receive_at_once(case):
    """An interrupt with no receive blocked is remembered: the next receive returns at once
    (InputEndpoint.interrupt). A counter compared at the start of receive loses it."""
    source = open_input(case.input_config, "contract")
    source.interrupt()
    assert not start_receive(source, LONG_TIMEOUT)()
    source.close()


def test_the_receive_after_an_interrupted_one_waits_normally(case):
    """The interrupted receive consumed the interrupt: the next one waits for a message
    sent while it waits, instead of returning empty at once."""
    output, source = open_pair(case)
    source.interrupt()
    assert not start_receive(source, LONG_TIMEOUT)()
    received = start_receive(source, LONG_TIMEOUT)
    with sending(case, lambda: output.send(sample(1)), output.flush):
        batch = received()
        assert [m.payload for m in batch.messages] == [b"m0"]
        source.ack(batch)
    output.close()
    source.close()


def test_interrupt_ends_a_blocked_receive(case):
    """An interrupt from another thread ends a receive that is waiting (or about to: one
    just before it counts as well, so no sleep is needed to be sure it started)."""
    source = open_input(case.input_config, "contract")
    received = start_receive(source, LONG_TIMEOUT)
    source.interrupt()
    assert not received()
    source.close()


def test_an_input_closed_then_connected_again_reads_on(case):
    """A route reconnects a failed input with close() then connect(): it must read on.
    (A live case sends after the reconnect: what it was sent before is gone by design.)"""
    if case.live:
        source = open_input(case.input_config, "contract")
        source.close()
        source.connect()
        output = open_output(case.output_config, "contract")
    else:
        output = open_output(case.output_config, "contract")
        output.send(sample(2))
        output.flush()
        source = open_input(case.input_config, "contract")
        source.close()
        source.connect()
    with sending(case, *([lambda: output.send(sample(2)), output.flush] if case.live else [])):
        got = messages_of(receive_n(source, 2, ack=case.settles_sends))
    assert sorted(m.payload for m in got) == [b"m0", b"m1"]
    source.close()
    output.close()


def test_an_output_closed_then_connected_again_sends_on(case):
    """A route reconnects an unreachable output with close() then connect() (the delivery
    rule, docs/delivery.md): it must send on. An output that refused to open again held its
    route forever after the first broker restart."""
    source = open_input(case.input_config, "contract") if case.live else None
    output = open_output(case.output_config, "contract")
    output.close()
    output.connect()
    source = source or open_input(case.input_config, "contract")
    with sending(case, lambda: output.send(sample(2)), output.flush):
        got = messages_of(receive_n(source, 2, ack=case.settles_sends))
    assert sorted(m.payload for m in got) == [b"m0", b"m1"]
    source.close()
    output.close()
