from __future__ import annotations

import threading

import pytest

from mq_bridge.config.declarations import parse_options
from mq_bridge.errors import ConfigError, NonRetryableError, SendError
from mq_bridge.middleware import buffer
from mq_bridge.middleware.buffer import BufferOptions

from .endpoints import ListOutput, context_with, numbered


def test_concurrent_sends_go_out_as_one_batch_and_each_returns_when_delivered():
    output = ListOutput()
    wrapped = buffer.wrap_output(
        output, BufferOptions(max_messages=4, max_delay_ms=60_000), context_with({})
    )
    returned: list[int] = []

    def send(n: int) -> None:
        wrapped.send(numbered(1))
        returned.append(len(output.sent))

    senders = [threading.Thread(target=send, args=(n,)) for n in range(4)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=60)
    assert output.calls == 1 and len(output.sent) == 4
    assert returned == [4, 4, 4, 4]  # nobody returned before the group was delivered


def test_a_lone_send_goes_out_after_max_delay():
    output = ListOutput()
    wrapped = buffer.wrap_output(
        output, BufferOptions(max_messages=100, max_delay_ms=1), context_with({})
    )
    wrapped.send(numbered(3))
    wrapped.send(numbered(2))
    assert output.calls == 2 and len(output.sent) == 5


def test_each_sender_gets_its_own_failures_indexed_into_its_own_batch():
    output = ListOutput(lambda m, a: NonRetryableError("bad") if m.get("bad") else None)
    wrapped = buffer.wrap_output(
        output, BufferOptions(max_messages=4, max_delay_ms=60_000), context_with({})
    )
    good, bad = numbered(2), [m.with_metadata(bad="yes") for m in numbered(2)]
    bad[0] = bad[0].with_metadata(bad="")
    errors: dict[str, BaseException | None] = {}

    def send(name: str, batch) -> None:
        try:
            wrapped.send(batch)
            errors[name] = None
        except SendError as error:
            errors[name] = error

    threads = [threading.Thread(target=send, args=a) for a in (("good", good), ("bad", bad))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors["good"] is None
    assert isinstance(errors["bad"], SendError) and list(errors["bad"].failures) == [1]


def test_flush_sends_what_is_waiting_at_once():
    output = ListOutput()
    wrapped = buffer.wrap_output(
        output, BufferOptions(max_messages=100, max_delay_ms=600_000), context_with({})
    )
    sender = threading.Thread(target=wrapped.send, args=(numbered(2),))
    sender.start()
    while not output.sent and sender.is_alive():
        wrapped.flush()
        sender.join(timeout=0.01)
    sender.join(timeout=60)
    assert not sender.is_alive() and len(output.sent) == 2


def test_bad_options_name_the_field():
    with pytest.raises(ConfigError, match=r"buffer\.max_messages"):
        options = parse_options(BufferOptions, {"max_messages": 0, "max_delay_ms": 1}, "buffer")
        buffer.wrap_output(ListOutput(), options, context_with({}))
