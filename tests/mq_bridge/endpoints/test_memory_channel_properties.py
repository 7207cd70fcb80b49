"""MemoryChannel behaves like a plain FIFO with push-back, whatever the order of calls."""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from mq_bridge import Message
from mq_bridge.endpoints.memory import topic as _memory_topic
from mq_bridge.endpoints.memory.topic import MemoryChannel

operations = st.lists(
    st.one_of(
        st.tuples(st.just("put_one"), st.integers(1, 1)),
        st.tuples(st.just("put_many"), st.integers(0, 40)),
        st.tuples(st.just("take"), st.integers(1, 60)),
        st.tuples(st.just("requeue"), st.just(0)),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_takes_see_puts_in_order_and_requeued_batches_first(ops):
    _memory_topic._COMPACT_AFTER = 8  # compact often, so that path is exercised too
    try:
        channel = MemoryChannel("model", capacity=0)
        model: deque[int] = deque()
        counter = 0
        last_taken: list[Message] = []
        for op, amount in ops:
            if op == "put_one":
                channel.put_one(Message(str(counter).encode()), None)
                model.append(counter)
                counter += 1
            elif op == "put_many":
                batch = [Message(str(counter + i).encode()) for i in range(amount)]
                channel.put_many(batch, None)
                model.extend(range(counter, counter + amount))
                counter += amount
            elif op == "take":
                last_taken = channel.take(amount, 0)
                expected = [model.popleft() for _ in range(min(amount, len(model)))]
                assert [int(m.payload) for m in last_taken] == expected
            elif last_taken:
                channel.requeue(last_taken)
                model.extendleft(reversed([int(m.payload) for m in last_taken]))
                last_taken = []
            assert len(channel) == len(model)
        assert [int(m.payload) for m in channel.take(10**6, 0)] == list(model)
    finally:
        _memory_topic._COMPACT_AFTER = 4096
