"""Every example in examples/ runs, as a user would run it, and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [*args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_raw_route(tmp_path: Path) -> None:
    out = _run(sys.executable, str(EXAMPLES / "raw_route.py"), cwd=tmp_path)
    assert out.splitlines() == [
        f"Hello, {name}! metadata: {{'source': 'raw_route.py'}}"
        for name in ("Ada", "Grace", "Linus")
    ]


def test_json_route(tmp_path: Path) -> None:
    out = _run(sys.executable, str(EXAMPLES / "json_route.py"), cwd=tmp_path)
    assert "ignored a heartbeat" in out
    assert "order.created {'order_id': 1, 'quantity': 3, 'unit_price': 5, 'total': 15," in out
    assert "order.cancelled {'order_id': 1, 'status': 'cancelled'}" in out


def test_pull_consumer(tmp_path: Path) -> None:
    out = _run(sys.executable, str(EXAMPLES / "pull_consumer.py"), str(tmp_path), cwd=tmp_path)
    assert out.splitlines() == [
        f"poll/commit: the amounts add up to {sum(10 + n for n in range(200))}",
        "poll_batch/ack: stored orders 0..149 (150), the nacked batch came again",
        "after a restart the group resumes at order 150",
    ]


def test_bench_memory(tmp_path: Path) -> None:
    out = _run(
        sys.executable, str(EXAMPLES / "bench_memory.py"), "--messages", "2000", cwd=tmp_path
    )
    assert out.startswith("2,000 messages in ") and out.rstrip().endswith(
        "msg/s through a memory route"
    )


def test_durable_pipeline(tmp_path: Path) -> None:
    out = _run(sys.executable, str(EXAMPLES / "durable_pipeline.py"), str(tmp_path), cwd=tmp_path)
    assert out.splitlines()[:2] == [
        f"first run: 1000 orders enriched (994 large) in {tmp_path}",
        "second run: 200 new orders enriched; the group resumed after its commit",
    ]


def test_durable_pipeline_from_the_command_line(tmp_path: Path) -> None:
    config = str(EXAMPLES / "durable_pipeline.yaml")
    handler = f"{EXAMPLES / 'durable_pipeline.py'}:enrich"
    env = {"TWAINMQ_ROOT": str(tmp_path / "store")}
    mq_bridge = [sys.executable, "-m", "mq_bridge"]
    order = '{"order_id": 1, "quantity": 2, "unit_price_cents": 450}'
    _run(
        *mq_bridge, "send", config, "--publisher", "orders", "--json", order, cwd=tmp_path, env=env
    )
    out = _run(*mq_bridge, "run", config, "--handler", handler, "--stop-when-idle", "0.5",
               cwd=tmp_path, env=env)  # fmt: skip
    assert "route enrich: 1 message in" in out
    out = _run(*mq_bridge, "consume", config, "--consumer", "enriched", cwd=tmp_path, env=env)
    assert (
        out
        == '{"order_id":1,"quantity":2,"unit_price_cents":450,"total_cents":900,"tier":"small"}\n'
    )
