"""The embedded server answers a ``PublishBatch`` per message although the consumer settles
in batches (one wake-up of the server per settled batch): each answer is its own message's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from mq_bridge import Message
from mq_bridge.endpoints.base import Batch
from mq_bridge.endpoints.grpc import batch_call
from mq_bridge.endpoints.grpc.proto import ACK, messages, method_path
from mq_bridge.errors import EndpointError, SendError
from tests.helpers import free_port
from tests.mq_bridge.endpoints.test_grpc import Acker, client, opened, server  # noqa: F401


def in_background(send: Callable[[], None]) -> Callable[[], BaseException | None]:
    """Run `send` on a thread; the returned function joins it and gives what it raised."""
    raised: list[BaseException | None] = [None]

    def run() -> None:
        try:
            send()
        except BaseException as error:
            raised[0] = error

    thread = threading.Thread(target=run)
    thread.start()

    def join() -> BaseException | None:
        thread.join(10)
        assert not thread.is_alive()
        return raised[0]

    return join


def wait_pending(source: Any, count: int) -> None:
    deadline = time.monotonic() + 5
    while source.status().pending < count:
        assert time.monotonic() < deadline, f"{source.status().pending} of {count} queued"
        time.sleep(0.01)


def take(source: Any, count: int) -> list[Batch]:
    """Receive exactly `count` messages (in as many batches as it takes)."""
    batches: list[Batch] = []
    while sum(len(batch) for batch in batches) < count:
        got = sum(len(batch) for batch in batches)
        batch = source.receive(count - got, 5)
        assert batch, "nothing arrived"
        batches.append(batch)
    return batches


def test_batches_settled_out_of_order_fail_exactly_the_nacked_messages(
    opened: Any,  # noqa: F811
) -> None:
    port = free_port()
    source = opened(server(port))
    sink = opened(client(port), "output")
    join = in_background(lambda: sink.send([Message(f"m{i}".encode()) for i in range(6)]))
    wait_pending(source, 6)
    first, second, third = take(source, 2), take(source, 2), take(source, 2)
    for batch in second:
        source.nack(batch)
    for batch in third + first:
        source.ack(batch)
    failed = join()
    assert isinstance(failed, SendError)
    assert sorted(failed.failures) == [2, 3] and failed.retriable


def test_closing_mid_batch_answers_the_settled_and_nacks_the_queued(
    opened: Any,  # noqa: F811
) -> None:
    port = free_port()
    source = opened(server(port))
    sink = opened(client(port), "output")
    join = in_background(lambda: sink.send([Message(f"m{i}".encode()) for i in range(6)]))
    wait_pending(source, 6)
    for batch in take(source, 2):
        source.ack(batch)
    source.close()  # the 4 still queued are answered NACK, then the server stops
    failed = join()
    assert isinstance(failed, SendError)
    assert sorted(failed.failures) == [2, 3, 4, 5]


def test_a_message_that_timed_out_does_not_keep_its_batch_from_being_answered(
    opened: Any,  # noqa: F811
) -> None:
    """The first of a settled batch was answered already (NACK: its commit timed out): the
    others still get their ACK."""
    port = free_port()
    source = opened(server(port, timeout_ms=200))
    early = opened(client(port), "output")
    late = opened(client(port), "output")
    join_early = in_background(lambda: early.send_one(Message(b"early")))
    wait_pending(source, 1)
    timed_out = join_early()
    assert isinstance(timed_out, EndpointError) and "Timed out" in str(timed_out)
    join_late = in_background(lambda: late.send_one(Message(b"late")))
    wait_pending(source, 2)
    batch = source.receive(10, 5)
    assert [m.payload for m in batch.messages] == [b"early", b"late"]
    source.ack(batch)
    assert join_late() is None


@pytest.mark.parametrize("garbage_at", [0, 2])
def test_a_malformed_message_mid_batch_ends_the_call_after_the_answers_before_it(
    opened: Any,  # noqa: F811
    garbage_at: int,
) -> None:
    port = free_port()
    source = opened(server(port))
    sink = opened(client(port), "output")
    proto = messages()
    good = [proto.BridgeMessage(payload=b"ok", id=f"id-{i}").SerializeToString() for i in range(4)]
    requests = [*good[:garbage_at], b"\xff\xff\xff\xff not protobuf", *good[garbage_at:]]
    with Acker(source) as acker:
        outcome = batch_call.publish_batch(
            sink._channel, method_path("PublishBatch").encode(), requests, 5
        )
        assert outcome.code is not None and outcome.code.name == "INTERNAL"
        answers = [proto.PublishResponse.FromString(answer) for answer in outcome.answers]
        assert [(a.ack.id, a.ack.status) for a in answers] == [
            (f"id-{i}", ACK) for i in range(garbage_at)
        ]
        sink.send([Message(b"a"), Message(b"b")])  # the server stays healthy
    assert [m.payload for m in acker.got] == [b"ok"] * garbage_at + [b"a", b"b"]
