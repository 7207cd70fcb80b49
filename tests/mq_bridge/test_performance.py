"""Performance smoke tests: run the memory benchmark scenarios small, print the rates.

Skipped unless ``MQ_BRIDGE_RUN_PERF_TESTS=1``, and deselected by the default ``-m`` filter:

    MQ_BRIDGE_RUN_PERF_TESTS=1 pytest -q -m performance

They check that every message arrives and print msg/s; the comparison against the peer is
the job of ``bench/mq_bridge_memory.py`` (timing thresholds do not belong in tests).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [
    pytest.mark.performance,
    pytest.mark.skipif(
        os.environ.get("MQ_BRIDGE_RUN_PERF_TESTS") != "1",
        reason="set MQ_BRIDGE_RUN_PERF_TESTS=1 to run the performance smoke tests",
    ),
]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "mq_bridge_memory.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mq_bridge_memory_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scenario", ["route", "route-kind", "route-batch1", "send-json"])
def test_scenario_delivers_everything(bench: ModuleType, scenario: str) -> None:
    rate = bench.SCENARIOS[scenario](20_000)  # exits with a message if anything went missing
    print(f"{scenario}: {rate:,.0f} msg/s")
    assert rate > 0


@pytest.mark.parametrize("scenario", ["poll-payload", "poll-json"])
def test_polling_reads_everything(bench: ModuleType, scenario: str) -> None:
    rate = bench.SCENARIOS[scenario](50_000)
    print(f"{scenario}: {rate:,.0f} msg/s")
    assert rate > 0
