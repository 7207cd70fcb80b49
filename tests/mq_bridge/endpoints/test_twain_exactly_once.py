"""Exactly-once twain -> handler -> twain routes (`exactly_once_output`), for real: route
processes killed with SIGKILL mid-stream, restarted, and the output counted: every input
message exactly once (no duplicates, none lost)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.endpoints.twain.exactly_once import SOURCE_KEY
from mq_bridge.runtime.factory import build_input, build_output, new_context
from twainmq import Twain
from twainmq.groups import GroupPaths, describe_group

pytestmark = pytest.mark.slow

ROUTE = textwrap.dedent(
    """
    import sys
    from mq_bridge import Route
    root, exactly_once = sys.argv[1], sys.argv[2] == "1"
    source = {"root": root, "topic": "in", "session_timeout_ms": 30000}
    if exactly_once:
        source["exactly_once_output"] = "out"
    config = {
        "input": {"twain": source},
        "output": {"twain": {"root": root, "topic": "out", "key_from": "n"}},
        "batch_size": 100,
    }
    Route.from_config(config, "copy").with_handler(lambda message: message).run()
    """
)


def start_route(root: Path, exactly_once: bool) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", ROUTE, str(root), "1" if exactly_once else "0"])


def written(store: Twain) -> int:
    return sum(store.end_offsets("out").values())


def feed(root: Path, first: int, count: int) -> list[Message]:
    messages = [Message(f"order {n}".encode(), {"n": str(n)}) for n in range(first, first + count)]
    with Publisher.from_config({"twain": {"root": str(root), "topic": "in"}}) as publisher:
        for start in range(0, count, 1000):
            publisher.send_batch(messages[start : start + 1000])
    return messages


def wait(condition, process: subprocess.Popen[bytes], what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 60
    while not condition():
        assert process.poll() is None, "the route process died on its own"
        assert time.monotonic() < deadline, f"stalled: {what}"
        time.sleep(0.002)


def run_with_kills(root: Path, exactly_once: bool, kills: int) -> list[Message]:
    store = Twain(root)
    store.create_topic("in", partitions=4)
    store.create_topic("out", partitions=3, key_type="u32")
    sent = feed(root, 0, 6000)
    for number in range(kills):
        route = start_route(root, exactly_once)
        target = written(store) + 700 + 137 * number  # somewhere inside a batch of 100
        wait(lambda: written(store) >= target, route, "output")  # noqa: B023
        os.kill(route.pid, signal.SIGKILL)
        route.wait()
        sent += feed(root, len(sent), 500)  # the stream goes on while the route is down
    route = start_route(root, exactly_once)
    paths = GroupPaths.of(root, "in", "copy")
    try:
        wait(
            lambda: (
                not sum(
                    p.lag
                    for p in describe_group(paths, store.end_offsets("in")).partitions.values()
                )
            ),
            route,
            "the route did not finish its input",
        )
    finally:
        os.kill(route.pid, signal.SIGKILL)
        route.wait()
    return sent


def read_output(root: Path) -> list[Message]:
    total = written(Twain(root))
    got: list[Message] = []
    with Consumer.from_config(
        {"twain": {"root": str(root), "topic": "out", "group": "check"}}
    ) as c:
        while len(got) < total:
            batch = c.poll(max=5000, timeout_ms=5000)
            assert batch, f"read {len(got)} of {total} output records"
            got += batch
    return got


def test_an_exactly_once_route_killed_mid_stream_writes_each_message_once(tmp_path: Path) -> None:
    root = tmp_path / "store"
    sent = run_with_kills(root, exactly_once=True, kills=6)
    got = read_output(root)
    duplicates = sum(n - 1 for n in Counter(m.id for m in got).values())
    assert duplicates == 0
    expected = {m.id: (m.payload, dict(m.metadata)) for m in sent}
    without_marker = {
        m.id: (m.payload, {k: v for k, v in m.metadata.items() if k != SOURCE_KEY}) for m in got
    }
    assert without_marker == expected  # none lost, each with its payload and metadata
    assert all(SOURCE_KEY in m.metadata for m in got)


def test_a_batch_written_but_not_committed_is_not_handed_out_again(tmp_path: Path) -> None:
    # What a crash between the output's write and the input's commit leaves, step by step.
    root = tmp_path / "store"
    store = Twain(root)
    store.create_topic("in", partitions=2)
    store.create_topic("out", partitions=2, key_type="u32")
    sent = feed(root, 0, 50)
    source = {"twain": {"root": str(root), "topic": "in", "exactly_once_output": "out"}}
    output = build_output({"twain": {"root": str(root), "topic": "out"}}, new_context("copy"))
    output.connect()
    first = build_input(source, new_context("copy"))
    first.connect()
    batch = first.receive(30, 5)
    assert len(batch.messages) == 30
    output.send(batch.messages)
    first.close()  # no ack: leaves the group without committing the batch, as a crash would
    again = build_input(source, new_context("copy"))
    again.connect()
    try:
        rest = []
        while len(rest) < 20:
            next_batch = again.receive(100, 5)
            assert next_batch.messages or rest, "nothing handed out"
            rest += next_batch.messages
            again.ack(next_batch)
        output.send(rest)
    finally:
        again.close()
        output.close()
    handed_out_twice = {m.id for m in batch.messages} & {m.id for m in rest}
    assert not handed_out_twice
    assert {m.id for m in read_output(root)} == {m.id for m in sent}
    assert len(read_output(root)) == 50
