"""``mq-bridge demo``: the README's first command, as a real child process."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

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


#: A hinted command must end by itself within this bound (a generous one, on a loaded machine).
HINT_SECONDS = 60
_HINT_IN_CONFIG = re.compile(r"#[ \t]+((?:mq-bridge|twainmq) [^#\n]+)")
_MODULES = {"mq-bridge": "mq_bridge", "twainmq": "twainmq"}


def hinted_commands(printed: str, config: str) -> list[str]:
    """The commands the demo tells the reader to run: its summary's, then its config's."""
    summary = printed.split("inspect them:\n", 1)[1]
    commands = [line.split("#")[0].strip() for line in summary.splitlines() if line.strip()]
    return commands + [match.strip() for match in _HINT_IN_CONFIG.findall(config)]


def test_every_command_the_demo_hints_at_runs_and_exits(tmp_path: Path) -> None:
    root = tmp_path / "store"
    demo = run_child("demo", "-n", "300", "--root", str(root), "-q", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    commands = hinted_commands(demo.stdout, (root / "pipeline.yaml").read_text())
    assert len(commands) == 5, commands  # 3 printed, 2 in the config
    for command in commands:
        program, *args = shlex.split(command)
        try:
            done = subprocess.run(
                [sys.executable, "-m", _MODULES[program], *args],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=HINT_SECONDS,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"the hint {command!r} did not exit within {HINT_SECONDS} s")
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert "Traceback" not in done.stderr
