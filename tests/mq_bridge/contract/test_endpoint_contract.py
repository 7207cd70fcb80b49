"""The contract every endpoint keeps, checked on the endpoint objects themselves."""

from __future__ import annotations

import threading
import time

import pytest

from mq_bridge import Message
from mq_bridge.endpoints.base import Batch, InputEndpoint, OutputEndpoint
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.mq_bridge.contract.cases import ContractCase

STATUS_KEYS = {"healthy", "target", "pending", "capacity", "error", "details"}


def open_output(case: ContractCase) -> OutputEndpoint:
    output = build_output(case.output_config, new_context("contract"))
    output.connect()
    return output


def open_input(case: ContractCase) -> InputEndpoint:
    source = build_input(case.input_config, new_context("contract"))
    source.connect()
    return source


def receive_n(source: InputEndpoint, count: int, timeout: float = 10.0) -> list[Batch]:
    """Batches until `count` messages arrived (or `timeout` passed)."""
    batches: list[Batch] = []
    deadline = time.monotonic() + timeout
    while sum(len(b) for b in batches) < count and time.monotonic() < deadline:
        batch = source.receive(count - sum(len(b) for b in batches), 0.2)
        if batch:
            batches.append(batch)
    return batches


def messages_of(batches: list[Batch]) -> list[Message]:
    return [m for b in batches for m in b.messages]


def sample(count: int) -> list[Message]:
    return [Message(f"m{i}".encode(), {"n": str(i), "kind": "test"}) for i in range(count)]


def test_what_is_sent_is_received_in_order_with_payload_metadata_and_id(case):
    sent = sample(5)
    output, source = open_output(case), open_input(case)
    output.send(sent[:3])
    output.send_one(sent[3])
    output.send([sent[4]])
    output.flush()
    got = messages_of(receive_n(source, 5))
    assert [(m.id, m.payload, m.metadata) for m in got] == [
        (m.id, m.payload, m.metadata) for m in sent
    ]
    output.close()
    source.close()


def test_acked_messages_are_not_delivered_again(case):
    output = open_output(case)
    output.send(sample(4))
    output.flush()
    source = open_input(case)
    first = receive_n(source, 2)
    for batch in first:
        source.ack(batch)
    source.close()
    again = open_input(case)
    if case.resumes_after_acks:
        rest = messages_of(receive_n(again, 2))
        assert [m.payload for m in rest] == [b"m2", b"m3"]
    else:  # no progress is kept across readers: a new one starts over, acked ones included
        rest = messages_of(receive_n(again, 4))
        assert [m.payload for m in rest] == [b"m0", b"m1", b"m2", b"m3"]
    again.close()
    output.close()


def test_a_nacked_batch_is_delivered_again_in_order(case):
    if not case.redelivers_on_nack:
        pytest.skip("this endpoint redelivers on the next run, not at once")
    output, source = open_output(case), open_input(case)
    output.send(sample(3))
    output.flush()
    batches = receive_n(source, 3)
    for batch in reversed(batches):
        source.nack(batch)
    again = messages_of(receive_n(source, 3))
    assert [m.payload for m in again] == [b"m0", b"m1", b"m2"]
    output.close()
    source.close()


def test_receive_returns_an_empty_batch_when_nothing_arrives(case):
    source = open_input(case)
    assert not source.receive(10, 0.05)
    source.close()


def test_receive_never_returns_more_than_asked(case):
    output, source = open_output(case), open_input(case)
    output.send(sample(7))
    output.flush()
    batch = source.receive(3, 5.0)
    assert 1 <= len(batch) <= 3
    output.close()
    source.close()


def test_exhausted_only_for_bounded_sources_once_everything_was_handed_out(case):
    output, source = open_output(case), open_input(case)
    output.send(sample(2))
    output.close()
    assert not source.exhausted or case.bounded
    for batch in receive_n(source, 2):
        source.ack(batch)
    source.receive(10, 0.05)
    assert source.exhausted is case.bounded
    source.close()


def test_status_has_the_documented_shape(case):
    for endpoint in (open_output(case), open_input(case)):
        status = endpoint.status().as_dict()
        assert set(status) == STATUS_KEYS
        assert status["healthy"] is True
        assert isinstance(status["target"], str) and status["target"]
        assert status["pending"] is None or status["pending"] >= 0
        assert isinstance(status["details"], dict)
        endpoint.close()


def test_close_is_idempotent_and_use_after_close_raises(case):
    output, source = open_output(case), open_input(case)
    output.close()
    output.close()
    source.close()
    source.close()
    with pytest.raises(RuntimeError, match="closed"):
        output.send(sample(1))
    with pytest.raises(RuntimeError, match="closed"):
        source.receive(1, 0.01)


def test_interrupt_ends_a_blocked_receive(case):
    source = open_input(case)
    result: list[Batch] = []
    reader = threading.Thread(target=lambda: result.append(source.receive(1, 30.0)))
    reader.start()
    time.sleep(0.05)
    source.interrupt()
    reader.join(10.0)
    assert not reader.is_alive() and not result[0]
    source.close()


def test_an_input_closed_then_connected_again_reads_on(case):
    """A route reconnects a failed input with close() then connect(): it must read on."""
    output = open_output(case)
    output.send(sample(2))
    output.flush()
    source = open_input(case)
    source.close()
    source.connect()
    got = messages_of(receive_n(source, 2))
    assert sorted(m.payload for m in got) == [b"m0", b"m1"]
    source.close()
    output.close()
