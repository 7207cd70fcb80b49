"""``mq-bridge demo``: the README's first command, as a real child process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mq_bridge import Consumer
from tests.mq_bridge.cli.helpers import run_child


def test_the_demo_enriches_every_order_into_a_second_topic(tmp_path: Path) -> None:
    root = tmp_path / "store"
    result = run_child("demo", "--messages", "3000", "--root", str(root), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "published 3,000 orders to topic 'orders'" in out
    assert "route enrich: 3,000 messages in" in out
    assert "3,000 orders enriched in" in out
    assert f"twainmq --root {root} describe orders.enriched" in out
    assert "stopped: done" in result.stderr

    config = {"twain": {"root": str(root), "topic": "orders.enriched", "group": "check"}}
    orders = []
    with Consumer.from_config(config) as consumer:
        while batch := consumer.poll(max=1000, timeout_ms=1000):
            orders += [message.json() for message in batch]
    assert sorted(order["order_id"] for order in orders) == list(range(3000))
    assert all(
        order["total_cents"] == order["quantity"] * order["unit_price_cents"] for order in orders
    )

    described = subprocess.run(
        [sys.executable, "-m", "twainmq", "--root", str(root), "describe", "orders.enriched"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0 and "3000" in described.stdout.replace(",", "")


def test_running_the_demo_config_again_resumes_with_nothing_to_do(tmp_path: Path) -> None:
    root = tmp_path / "store"
    assert run_child("demo", "-n", "500", "--root", str(root), "-q", cwd=tmp_path).returncode == 0
    rerun = run_child(
        "run", str(root / "pipeline.yaml"), "--handler", "mq_bridge.cli.demo:enrich_order",
        "--stop-when-idle", "0.5", cwd=tmp_path,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert "route enrich: 0 messages" in rerun.stdout
