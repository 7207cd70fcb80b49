"""Durability of twain -> handler -> twain routes, for real: processes killed with SIGKILL.

Each child process runs the route ``pipeline`` (batches of `BATCH`, acked after the output
wrote them). The parent feeds the input topic, kills children mid-stream, restarts them and
finally checks the output topic: every input message is there, with its id and metadata, and
the duplicates fit in the uncommitted window (one batch per kill when every ack commits; with
deferred commits, at most what the killed process had written).
"""

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
from twainmq import Twain
from twainmq.groups import GroupPaths, describe_group

pytestmark = pytest.mark.slow

BATCH = 100

ROUTE = textwrap.dedent(
    f"""
    import sys
    from mq_bridge import Route
    root, interval = sys.argv[1], int(sys.argv[2])
    source = {{"root": root, "topic": "in", "session_timeout_ms": 30000}}
    config = {{
        "input": {{"twain": {{**source, "commit_interval_ms": interval}}}},
        "output": {{"twain": {{"root": root, "topic": "out", "key_from": "n"}}}},
        "batch_size": {BATCH},
    }}
    route = Route.from_config(config, "pipeline")
    route.with_handler(lambda message: message.payload.upper()).run()
    """
)


def start_route(root: Path, commit_interval_ms: int = 0) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", ROUTE, str(root), str(commit_interval_ms)]
    return subprocess.Popen(command)


def kill(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def written(store: Twain, topic: str) -> int:
    return sum(store.end_offsets(topic).values())


def wait_for_output(store: Twain, at_least: int, processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 60
    while written(store, "out") < at_least:
        assert all(p.poll() is None for p in processes), "a route process died on its own"
        assert time.monotonic() < deadline, f"the output stalled at {written(store, 'out')}"
        time.sleep(0.005)


def wait_until_all_committed(root: Path, processes: list[subprocess.Popen[bytes]]) -> None:
    """Until the route's group has committed every input message (its output is complete)."""
    deadline = time.monotonic() + 60
    paths = GroupPaths.of(root, "in", "pipeline")
    while sum(
        p.lag for p in describe_group(paths, Twain(root).end_offsets("in")).partitions.values()
    ):
        assert all(p.poll() is None for p in processes), "a route process died on its own"
        assert time.monotonic() < deadline, "the route stalled before the end of its input"
        time.sleep(0.005)


def feed(root: Path, first: int, count: int) -> list[Message]:
    messages = [
        Message(f"order {n}".encode(), {"n": str(n), "customer": f"c{n % 7}", "kind": "order"})
        for n in range(first, first + count)
    ]
    config = {"twain": {"root": str(root), "topic": "in", "create": {"partitions": 4}}}
    with Publisher.from_config(config) as publisher:
        for start in range(0, count, 1000):
            publisher.send_batch(messages[start : start + 1000])
    return messages


def read_output(root: Path) -> list[Message]:
    total = written(Twain(root), "out")
    got: list[Message] = []
    config = {"twain": {"root": str(root), "topic": "out", "group": "check"}}
    with Consumer.from_config(config) as consumer:
        while len(got) < total:
            batch = consumer.poll(max=5000, timeout_ms=5000)
            assert batch, f"read {len(got)} of {total} output records"
            got += batch
    return got


def check_output(root: Path, sent: list[Message], max_duplicates: int) -> None:
    got = read_output(root)
    expected = {m.id: (m.payload.upper(), dict(m.metadata)) for m in sent}
    # None lost, and each with its id, its handled payload and all of its metadata.
    assert {m.id: (m.payload, dict(m.metadata)) for m in got} == expected
    duplicates = sum(count - 1 for count in Counter(m.id for m in got).values())
    assert duplicates <= max_duplicates


def create_topics(root: Path) -> Twain:
    store = Twain(root)
    store.create_topic("in", partitions=4)
    store.create_topic("out", partitions=4, key_type="u32")
    return store


def test_a_route_killed_mid_stream_and_restarted_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = create_topics(root)
    sent = feed(root, 0, 8000)
    kills = 0
    for _ in range(4):
        route = start_route(root)
        wait_for_output(store, written(store, "out") + 1500, [route])
        kill(route)
        kills += 1
        sent += feed(root, len(sent), 2000)  # the stream goes on while the route is down
    route = start_route(root)
    try:
        wait_until_all_committed(root, [route])
    finally:
        kill(route)
        kills += 1
    check_output(root, sent, max_duplicates=kills * BATCH)


def owners(root: Path) -> int:
    """How many members of the route's group own partitions now."""
    paths = GroupPaths.of(root, "in", "pipeline")
    if not paths.directory.is_dir():
        return 0
    return len(set(describe_group(paths, Twain(root).end_offsets("in")).owners.values()))


def test_when_one_of_two_route_processes_is_killed_the_other_takes_its_partitions(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    store = create_topics(root)
    # Deferred commits (at most every 100 ms): the killed member's acks since its last
    # commit come again, and on_revoke hands exact progress over on every rebalance.
    first, second = start_route(root, 100), start_route(root, 100)
    try:
        deadline = time.monotonic() + 60
        while owners(root) < 2:
            assert time.monotonic() < deadline, "the two routes never shared the partitions"
            time.sleep(0.01)
        sent = feed(root, 0, 6000)
        wait_for_output(store, 2000, [first, second])
        kill(first)
        written_before_the_kill = written(store, "out")
        sent += feed(root, len(sent), 6000)
        wait_until_all_committed(root, [second])
    finally:
        for process in (first, second):
            if process.poll() is None:
                kill(process)
    # Only what was written before the kill can come twice (plus the survivor's last batch).
    check_output(root, sent, max_duplicates=written_before_the_kill + BATCH)
