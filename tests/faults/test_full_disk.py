"""A full disk under running writers, end to end: nothing acknowledged is lost (lost == 0).

Each case counts uniquely numbered messages on a small tmpfs (``tests/full_disk.py``) that a
filler written first has nearly filled:

- (a) a twainmq producer writes until the disk refuses, keeps trying the refused message,
  and goes on by itself once the filler is deleted;
- (b) a route into twain, run as a real ``mq-bridge run CONFIG`` process: its input a twain
  topic on the normal disk holding every number, its output a twain topic on the tmpfs. The
  output's disk fills; the route holds the refused batch and retries (retriable); it is
  killed (kill -9) while the disk is full and started again; then space is freed and the
  route resumes by itself;
- (c) the same with the `file` endpoint as the route's output on the tmpfs.

The figures (acknowledged, received, lost, duplicates) are printed and put in the assertion
message; duplicates are allowed (at least once), losses are not.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from mq_bridge import Consumer, Publisher
from tests.faults.harness import RouteProcess
from tests.full_disk import MIB, fill, small_disk
from twainmq import StorageFullError, Twain

pytestmark = [pytest.mark.faults, pytest.mark.slow]

COUNT = 10_000
LOG_WARNINGS = ("--log-level", "warn")
PADDING = b"." * 200  # about 250 bytes a message: the output's free MiB fills within COUNT


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_disk() as directory:
        yield directory


def numbered(n: int) -> bytes:
    return b"%d %s" % (n, PADDING)


def number_of(payload: bytes) -> int:
    head, _, rest = payload.partition(b" ")
    assert rest == PADDING, f"a torn or foreign message: {payload[:60]!r}"
    return int(head)


def figures(case: str, acknowledged: list[int], seen: Counter[int]) -> str:
    lost = len(set(acknowledged) - set(seen))
    duplicates = sum(seen.values()) - len(seen)
    line = (
        f"{case}: acknowledged {len(acknowledged)}, received {sum(seen.values())}, "
        f"lost {lost}, duplicates {duplicates}"
    )
    print(line)
    return line


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} (waited {seconds:.0f} s)"
        time.sleep(0.05)


def twainmq_check(root: Path, topic: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "twainmq", "--root", str(root), "check", topic],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_producer_on_a_full_disk_goes_on_by_itself_once_space_is_freed(disk: Path) -> None:
    filler = fill(disk / "filler", leave=MIB)
    store = Twain(disk / "store")
    store.create_topic("t", partitions=4, key_type="u32")
    acknowledged: list[int] = []
    refused: list[StorageFullError] = []
    done = threading.Event()

    def produce() -> None:
        with store.producer("t") as producer:
            n = 0
            while n < COUNT:
                try:
                    if n % 10:
                        producer.write_message(n, numbered(n))
                        batch = [n]
                    else:  # every tenth call a batch of ten
                        batch = list(range(n, min(n + 10, COUNT)))
                        producer.write_messages([(i, numbered(i)) for i in batch])
                except StorageFullError as error:
                    refused.append(error)
                    time.sleep(0.005)  # the same message(s) again
                    continue
                acknowledged.extend(batch)
                n += len(batch)
        done.set()

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    wait_for(lambda: len(refused) >= 50, 30, "the disk never refused a write")
    assert all(error.retriable for error in refused)
    filler.unlink()
    assert done.wait(60), "the producer did not finish once space was freed"
    seen: Counter[int] = Counter()
    consumer = store.consumer("t")
    try:
        while (message := consumer.poll(timeout=0)) is not None:
            seen[number_of(message.message)] += 1
    finally:
        consumer.close()
    line = figures("(a) twainmq producer", acknowledged, seen)
    assert acknowledged == list(range(COUNT)), line
    assert set(seen) == set(acknowledged), line  # lost == 0
    twainmq_check(disk / "store", "t")


def twain(root: Path, topic: str, **options: Any) -> dict[str, Any]:
    create = {"partitions": 2, "key_type": "u32"}
    return {"twain": {"root": str(root), "topic": topic, "create": create, **options}}


def fill_input(root: Path) -> list[int]:
    with Publisher.from_config(twain(root, "in")) as publisher:
        for start in range(0, COUNT, 1000):
            publisher.send_batch([numbered(n) for n in range(start, start + 1000)])
    return list(range(COUNT))  # send_batch returned: every one acknowledged at the source


def run_through_a_full_disk(
    tmp_path: Path, disk: Path, output: dict[str, Any], refusal: str, seen: Callable[[], int]
) -> None:
    """Fill the output's disk under a running route, kill -9 it while full, start it again,
    free the space, and wait until `seen()` (distinct numbers at the output) reaches COUNT."""
    route = {
        "input": twain(tmp_path / "in-store", "in", group="route", session_timeout_ms=30_000),
        "output": output,
        "batch_size": 100,
        "reconnect_interval_ms": 200,  # the retry backoff's cap
    }
    config = tmp_path / "route.yaml"
    config.write_text(yaml.safe_dump({"routes": {"full_disk": route}}, sort_keys=False))
    filler = fill(disk / "filler", leave=MIB)
    first = RouteProcess(config, tmp_path / "first.log", None, LOG_WARNINGS)
    try:
        wait_for(lambda: first.logged(refusal), 60, f"no {refusal} in the route's log")
        time.sleep(0.3)  # a few retries
    finally:
        first.kill()  # kill -9 while the disk is full
    again = RouteProcess(config, tmp_path / "again.log", None, LOG_WARNINGS)
    try:
        wait_for(lambda: again.logged(refusal), 60, f"no {refusal} after the restart")
        assert seen() < COUNT
        filler.unlink()
        wait_for(lambda: seen() >= COUNT, 60, "the route did not resume once space was freed")
    except AssertionError as error:
        raise AssertionError(f"{error}\n{again.tail()}") from None
    finally:
        status = again.stop()
    assert status == 0, again.tail()


def test_a_route_into_twain_holds_a_full_disk_and_resumes(tmp_path: Path, disk: Path) -> None:
    acknowledged = fill_input(tmp_path / "in-store")
    out = disk / "out-store"
    seen: Counter[int] = Counter()
    reader = Consumer.from_config(twain(out, "out", group="count"))

    def distinct() -> int:
        while batch := reader.poll(max=2000, timeout_ms=0):
            seen.update(number_of(message.payload) for message in batch)
            reader.commit()
        return len(seen)

    try:
        run_through_a_full_disk(tmp_path, disk, twain(out, "out"), "TwainStorageError", distinct)
        distinct()
    finally:
        reader.close()
    line = figures("(b) route into twain", acknowledged, seen)
    assert set(seen) == set(acknowledged), line  # lost == 0
    twainmq_check(out, "out")


def test_a_route_into_a_file_holds_a_full_disk_and_resumes(tmp_path: Path, disk: Path) -> None:
    acknowledged = fill_input(tmp_path / "in-store")
    path = disk / "out.jsonl"
    seen: Counter[int] = Counter()
    offset = [0]
    undecodable: list[bytes] = []

    def distinct() -> int:
        """The numbers of the whole records appended since the last look."""
        if path.exists():
            data = path.read_bytes()
            end = data.rfind(b"\n") + 1
            for line in data[offset[0] : end].splitlines():
                try:  # a `normal` record: a JSON envelope, the payload as text
                    payload = orjson.loads(line)["payload"].encode()
                except (orjson.JSONDecodeError, KeyError):  # as the file input, skip it
                    undecodable.append(line[:80])
                    continue
                seen[number_of(payload)] += 1
            offset[0] = max(offset[0], end)
        return len(seen)

    run_through_a_full_disk(
        tmp_path, disk, {"file": {"path": str(path)}}, "FileStorageError", distinct
    )
    distinct()
    line = figures("(c) route into a file", acknowledged, seen)
    line += f", undecodable records {len(undecodable)} {undecodable[:3]}"
    assert set(seen) == set(acknowledged), line  # lost == 0
    numbers: list[int] = []
    with Consumer.from_config({"file": {"path": str(path), "mode": "consume"}}) as consumer:
        while not consumer.exhausted:
            numbers += [number_of(m.payload) for m in consumer.poll(max=2000, timeout_ms=1000)]
    assert Counter(numbers) == seen, "the file input reads the same records, none torn"
