"""Scale-out, shown: the demo pipeline on Kafka with 3 `mq-bridge run` processes in one
consumer group; one is killed (-9) mid-stream and the others take over.

The config is examples/scale_out_kafka.yaml itself, with only its topic and group names made
unique for this run (the server is shared). The orders and the handler are the demo's
(`mq_bridge.cli.demo`). What must hold: every order comes out enriched (at least once: the
killed member's unacknowledged batches are delivered again to the member that takes its
partitions over), and the killed member did work before it died. The duplicate count is
printed (and recorded as the test's ``duplicates`` property).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.cli.demo import sample_order
from tests.mq_bridge.endpoints.test_kafka import delete_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "scale_out_kafka.yaml"
ORDERS = 30_000
MEMBERS = 3
_PROGRESS = re.compile(r"enrich: ([\d,]+) done")


def unique_config(bootstrap: str, suffix: str) -> dict[str, Any]:
    """The example, with this run's topic and group names (and the test server's address)."""
    text = EXAMPLE.read_text()
    text = text.replace("topic: orders.enriched", f"topic: enriched-{suffix}")
    text = text.replace("topic: orders", f"topic: orders-{suffix}")
    text = text.replace("group_id: enrich", f"group_id: enrich-{suffix}")
    text = text.replace("group_id: viewer", f"group_id: viewer-{suffix}")
    text = text.replace('"127.0.0.1:9092"', f'"{bootstrap}"')
    return yaml.safe_load(text)


@pytest.fixture
def pipeline(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Path]:
    suffix = uuid.uuid4().hex[:8]
    path = tmp_path / "scale_out_kafka.yaml"
    path.write_text(yaml.safe_dump(unique_config(kafka_bootstrap, suffix)))
    try:
        yield path
    finally:
        groups = (f"enrich-{suffix}", f"viewer-{suffix}")
        for topic in (f"orders-{suffix}", f"enriched-{suffix}"):
            delete_topic(kafka_bootstrap, topic, groups)


def start_member(config: Path, log: Path) -> subprocess.Popen[bytes]:
    """``mq-bridge run CONFIG --handler mq_bridge.cli.demo:enrich_order`` (the demo's)."""
    script = Path(sys.executable).with_name("mq-bridge")
    program = [str(script)] if script.exists() else [sys.executable, "-m", "mq_bridge"]
    command = [
        *program, "run", str(config),
        "--handler", "mq_bridge.cli.demo:enrich_order", "--progress-interval", "0.2",
    ]  # fmt: skip
    with log.open("wb") as stderr:
        return subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT, start_new_session=True
        )


def done_by(log: Path) -> int:
    """The last progress count a member printed."""
    counts = _PROGRESS.findall(log.read_text(errors="replace"))
    return int(counts[-1].replace(",", "")) if counts else 0


def order(number: int) -> Message:
    data = sample_order(number)
    return Message.from_json(data, {"kind": "order.created", "customer": data["customer"]})


def read_enriched(config: Path, until: int, timeout: float) -> Counter[int]:
    """How often each order id came out, reading until `until` distinct ids (or timeout)."""
    seen: Counter[int] = Counter()
    deadline = time.monotonic() + timeout
    with Consumer.from_file(str(config), "enriched") as consumer:
        while len(seen) < until and time.monotonic() < deadline:
            for message in consumer.poll(max=500, timeout_ms=500):
                seen[message.json()["order_id"]] += 1
            consumer.commit()
    return seen


def test_three_members_one_killed_nothing_lost(
    pipeline: Path, tmp_path: Path, record_property: Any
) -> None:
    logs = [tmp_path / f"member-{n}.log" for n in range(MEMBERS)]
    members = [start_member(pipeline, log) for log in logs]
    victim = members[0]
    try:
        with Publisher.from_file(str(pipeline), "orders") as publisher:
            # Mid-stream: publish in small batches until every member has done some work
            # (each has joined the group and owns partitions), then up to half the orders.
            sent, deadline = 0, time.monotonic() + 90
            while any(done_by(log) == 0 for log in logs):
                assert time.monotonic() < deadline, "the members never all took part"
                assert all(m.poll() is None for m in members), "a member exited early"
                publisher.send_batch([order(n) for n in range(sent, sent + 100)])
                sent += 100
                time.sleep(0.1)
            for start in range(sent, ORDERS // 2, 1000):
                publisher.send_batch([order(n) for n in range(start, min(start + 1000, ORDERS))])
            sent = max(sent, ORDERS // 2)
            victim_done = done_by(logs[0])
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(10)
            for start in range(sent, ORDERS, 1000):
                publisher.send_batch([order(n) for n in range(start, min(start + 1000, ORDERS))])
        seen = read_enriched(pipeline, ORDERS, timeout=120)
        survivors = members[1:]
        assert all(m.poll() is None for m in survivors), "a surviving member died"
    finally:
        for member in members:
            if member.poll() is None:
                os.killpg(member.pid, signal.SIGTERM)
        for member in members:
            try:
                member.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(member.pid, signal.SIGKILL)
    missing = set(range(ORDERS)) - set(seen)
    duplicates = sum(count - 1 for count in seen.values())
    record_property("duplicates", duplicates)
    print(
        f"\nscale-out: {ORDERS} orders, {MEMBERS} members, the killed one had done "
        f"{victim_done}; {len(missing)} lost, {duplicates} duplicate(s)"
    )
    assert victim_done > 0
    assert not missing, f"{len(missing)} order(s) lost, e.g. {sorted(missing)[:5]}"
