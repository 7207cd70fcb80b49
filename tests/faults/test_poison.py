"""A poison message under a running ``mq-bridge run``: a handler bug, with and without a dlq.

The route reads the embedded log (a durable input, so a failed message can come again) and
writes the log. Every 97th number makes the handler raise a `KeyError` (tests.faults.poison)
until the fix is "deployed" (a file appears). Counted end to end, lost must be 0:

- without a dlq, the poison message is redelivered with backoff (never a hot loop, its
  traceback logged a bounded number of times) and holds the route; the route is killed
  (kill -9), the fix deployed, the route started again: every number arrives;
- with a dlq, the poison messages are dead-lettered and the rest flows; the route is killed
  mid-stream and started again: every number is in the output or the dead letters.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from mq_bridge import Consumer, Publisher
from tests.faults.harness import RouteProcess
from tests.faults.poison import is_poison

pytestmark = [pytest.mark.faults]

HANDLER = "tests.faults.poison:buggy"
COUNT = 1000


def twain(root: Path, topic: str, **options: Any) -> dict[str, Any]:
    create = {"partitions": 2, "key_type": "u32"}
    return {"twain": {"root": str(root), "topic": topic, "create": create, **options}}


def write_config(path: Path, root: Path, dead_letters: bool) -> Path:
    output = twain(root, "out")
    if dead_letters:
        output["middlewares"] = [{"dlq": {"endpoint": twain(root, "dead")}}]
    route = {
        "input": twain(root, "in", group="route"),
        "output": output,
        "batch_size": 50,
        "reconnect_interval_ms": 300,
    }
    path.write_text(yaml.safe_dump({"routes": {"poison": route}}))
    return path


def start_route(config: Path, log: Path, fixed: Path) -> RouteProcess:
    """``mq-bridge run CONFIG --handler tests.faults.poison:buggy``."""
    return RouteProcess(config, log, HANDLER, environment={"FAULTS_FIXED": str(fixed)})


def produce(root: Path) -> None:
    with Publisher.from_config(twain(root, "in")) as publisher:
        publisher.send_batch([b"%d" % n for n in range(COUNT)])  # returned: all acknowledged


def read_all(root: Path, topic: str, seen: Counter[int], group: str) -> None:
    """Add what `topic` holds beyond `group`'s commit to `seen` (one reader per topic)."""
    with Consumer.from_config(twain(root, topic, group=group)) as consumer:
        while batch := consumer.poll(max=500, timeout_ms=300):
            seen.update(int(message.payload) for message in batch)
            consumer.commit()


def wait_for(condition: Any, seconds: float, what: str, route: RouteProcess) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (waited {seconds:.0f} s)\n{route.tail()}")
        time.sleep(0.2)


def figures(case: str, seen: Counter[int]) -> str:
    lost = COUNT - len(set(seen) & set(range(COUNT)))
    duplicates = sum(seen.values()) - len(seen)
    received = sum(seen.values())
    line = (
        f"{case}: acknowledged {COUNT}, received {received}, lost {lost}, duplicates {duplicates}"
    )
    print(line)
    return line


def test_a_poison_message_without_a_dlq_is_redelivered_not_dropped(tmp_path: Path) -> None:
    root, fixed = tmp_path / "store", tmp_path / "fixed"
    config = write_config(tmp_path / "route.yaml", root, dead_letters=False)
    produce(root)
    out: Counter[int] = Counter()
    group = f"count-{uuid.uuid4().hex[:6]}"
    route = start_route(config, tmp_path / "first.log", fixed)
    try:
        wait_for(
            lambda: read_all(root, "out", out, group) or len(out) >= 12, 30, "no output", route
        )
        time.sleep(2.0)  # the poison message is held: backoff, not a hot loop, not a drop
        read_all(root, "out", out, group)
        assert len(out) < COUNT and not any(map(is_poison, out)), "the poison message passed"
        text = route.log.read_text()
        assert "KeyError" in text and "Traceback" in text, route.tail()
        assert text.count("Traceback") <= 3, "the traceback is logged a bounded number of times"
        route.kill()  # kill -9 while it holds the poison message
        fixed.touch()  # the fix is deployed
        route = start_route(config, tmp_path / "fixed.log", fixed)
        wait_for(
            lambda: read_all(root, "out", out, group) or set(range(COUNT)) <= set(out),
            60,
            "not every number arrived after the fix",
            route,
        )
        assert route.stop() == 0  # nothing dropped: exit status 0, not 3
    finally:
        route.kill()
    line = figures("poison, no dlq, kill -9 + fix", out)
    assert set(range(COUNT)) <= set(out), line


def test_poison_messages_with_a_dlq_are_dead_lettered_and_the_rest_flows(tmp_path: Path) -> None:
    root, fixed = tmp_path / "store", tmp_path / "fixed"
    config = write_config(tmp_path / "route.yaml", root, dead_letters=True)
    produce(root)
    out: Counter[int] = Counter()
    dead: Counter[int] = Counter()
    group = f"count-{uuid.uuid4().hex[:6]}"
    route = start_route(config, tmp_path / "first.log", fixed)
    try:
        wait_for(lambda: read_all(root, "out", out, group) or len(out) >= 200, 30, "slow", route)
        route.kill()  # kill -9 mid-stream
        route = start_route(config, tmp_path / "again.log", fixed)

        def everything() -> bool:
            read_all(root, "out", out, group)
            read_all(root, "dead", dead, group)
            return set(range(COUNT)) <= set(out) | set(dead)

        wait_for(everything, 60, "not every number arrived or was dead-lettered", route)
        assert route.stop() == 0
    finally:
        route.kill()
    assert set(dead) == {n for n in range(COUNT) if is_poison(n)}
    assert not any(map(is_poison, out))
    line = figures("poison, dlq, kill -9", out + dead)
    assert set(range(COUNT)) <= set(out) | set(dead), line
