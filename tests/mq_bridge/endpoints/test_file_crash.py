"""Crash paths of the `file` endpoint, for real: processes killed with SIGKILL mid-stream."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mq_bridge import Consumer, Message, Publisher

pytestmark = pytest.mark.slow

WRITER = textwrap.dedent(
    """
    import sys
    from mq_bridge import Message, Publisher
    publisher = Publisher.from_config({"file": {"path": sys.argv[1]}})
    number = 0
    while True:
        batch = [
            Message(b"x" * (n % 700), {"n": str(n), "kind": "crash-test"})
            for n in range(number, number + 50)
        ]
        publisher.send_batch(batch)
        number += 50
        print(number, flush=True)  # everything below `number` is acknowledged
    """
)

READER = textwrap.dedent(
    """
    import sys
    from mq_bridge import Consumer
    config = {"file": {"path": sys.argv[1], "mode": "group_subscribe", "group_id": "g"}}
    consumer = Consumer.from_config(config)
    while True:
        batch = consumer.poll(max=97, timeout_ms=5000)
        print("handled", batch[-1].metadata["n"], flush=True)
        consumer.commit()
        print("committed", batch[-1].metadata["n"], flush=True)
    """
)


def run_until(script: str, path: Path, enough: int) -> dict[str, int]:
    """Run `script` until it reports a number >= `enough`, SIGKILL it mid-stream.

    The child prints lines ``[word] number``; returns the last number per word, including
    lines it printed between our decision and its death.
    """
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True
    )
    last: dict[str, int] = {}
    try:
        assert process.stdout is not None
        for line in process.stdout:
            *word, number = line.split()
            last[" ".join(word)] = int(number)
            if int(number) >= enough:
                os.kill(process.pid, signal.SIGKILL)
                break
        for line in process.stdout:  # what it printed before the signal landed
            *word, number = line.split()
            last[" ".join(word)] = int(number)
    finally:
        process.kill()
        process.wait(timeout=60)
    assert max(last.values(), default=-1) >= enough, "the child stopped before it was killed"
    return last


def read_all(path: Path) -> list[int]:
    """The numbers of the records in the file, each checked whole (payload and metadata)."""
    with Consumer.from_config({"file": {"path": str(path), "mode": "consume"}}) as consumer:
        numbers: list[int] = []
        while not consumer.exhausted:
            for message in consumer.poll(max=500, timeout_ms=1000):
                n = int(message.metadata["n"])
                assert message.metadata == {"n": str(n), "kind": "crash-test"}
                assert message.payload == b"x" * (n % 700)
                numbers.append(n)
            consumer.commit()
        return numbers


def test_a_killed_writer_loses_no_acknowledged_record_and_leaves_no_garbage(
    tmp_path: Path,
) -> None:
    path = tmp_path / "stream.jsonl"
    acknowledged = run_until(WRITER, path, enough=3000)[""]
    numbers = read_all(path)
    assert len(numbers) >= acknowledged
    assert numbers == list(range(len(numbers)))  # complete records only, in order
    with Publisher.from_config({"file": {"path": str(path)}}) as publisher:
        n = len(numbers)  # a restarted writer appends cleanly
        publisher.send(Message(b"x" * (n % 700), {"n": str(n), "kind": "crash-test"}))
    assert read_all(path) == list(range(len(numbers) + 1))


def test_a_killed_group_reader_resumes_after_its_last_commit(tmp_path: Path) -> None:
    path = tmp_path / "work.jsonl"
    total = 20_000
    with Publisher.from_config({"file": {"path": str(path)}}) as publisher:
        publisher.send_batch([Message(b"payload", {"n": str(n)}) for n in range(total)])
    reported = run_until(READER, path, enough=5000)
    handled, committed = reported["handled"], reported["committed"]
    config = {"file": {"path": str(path), "mode": "group_subscribe", "group_id": "g"}}
    with Consumer.from_config(config) as consumer:
        rest: list[int] = []
        while not rest or rest[-1] < total - 1:
            batch = consumer.poll(max=1000, timeout_ms=5000)
            assert batch, "the restarted reader ran dry before the end of the file"
            rest += [int(m.metadata["n"]) for m in batch]
            consumer.commit()
    # It resumes right after a commit: nothing it committed comes again, nothing it had not
    # handled is skipped, and from there on every record arrives once, in order.
    assert committed + 1 <= rest[0] <= handled + 1
    assert rest == list(range(rest[0], total))
