"""Property test: any mix of writes, batches, seeks, assigns and polls matches a simple model."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from twainmq import Twain

PARTITIONS = 3

steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, PARTITIONS - 1), st.binary(max_size=300)),
        st.tuples(st.just("batch"), st.lists(st.integers(0, 50), max_size=20)),
        st.tuples(st.just("poll"), st.integers(1, 30)),
        st.tuples(st.just("seek"), st.integers(0, PARTITIONS - 1), st.floats(0, 1)),
        st.tuples(st.just("assign"), st.sets(st.integers(0, PARTITIONS - 1))),
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(steps)
def test_consumer_matches_the_model(actions: list[tuple]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as root:
        tmq = Twain(root)
        tmq.create_topic("t", partitions=PARTITIONS, segment_bytes=1024, index_interval_bytes=64)
        producer = tmq.producer("t", partitioner=lambda key, n: key % n)
        consumer = tmq.consumer("t", fetch_bytes=1024)
        log: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        position = {p: 0 for p in range(PARTITIONS)}
        for action in actions:
            run_step(action, producer, consumer, log, position)
            assert {p: consumer.position(p) for p in position} == position
            assert consumer.end_offsets() == {p: len(m) for p, m in log.items()}


def run_step(action, producer, consumer, log, position) -> None:  # type: ignore[no-untyped-def]
    kind = action[0]
    if kind == "write":
        _, partition, payload = action
        landed = producer.write_message(partition, payload)
        assert (landed.partition, landed.offset) == (partition, len(log[partition]))
        log[partition].append(payload)
    elif kind == "batch":
        producer.write_messages([(key, str(key).encode()) for key in action[1]])
        for key in action[1]:
            log[key % PARTITIONS].append(str(key).encode())
    elif kind == "poll":
        for message in consumer.poll_many(action[1]):
            assert message.offset == position[message.partition]
            assert message.message == log[message.partition][message.offset]
            position[message.partition] += 1
    elif kind == "seek" and action[1] in position:
        offset = int(action[2] * len(log[action[1]]))
        consumer.seek(action[1], offset)
        position[action[1]] = offset
    elif kind == "assign":
        new = {p: position.get(p, 0) for p in action[1]}
        consumer.assign(new)
        position.clear()
        position.update(new)
