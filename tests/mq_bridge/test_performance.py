"""Performance smoke tests: run the memory benchmark scenarios small, print the rates.

Skipped unless ``MQ_BRIDGE_RUN_PERF_TESTS=1``, and deselected by the default ``-m`` filter:

    MQ_BRIDGE_RUN_PERF_TESTS=1 pytest -q -m performance

They run the scenarios of ``bench/mq_bridge_memory.py`` unchanged, with its drainer and
consumer swapped for recording ones, and check what arrived: every message, once, in order,
with its document and metadata. They print msg/s; the comparison against the peer is the job
of the benchmark script (timing thresholds do not belong in tests).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mq_bridge import Consumer, MemoryDrainer, Message

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


class Recorded:
    """What the scenario's drainer or consumer took, in the order it took it."""

    messages: list[Message] = []


class RecordingDrainer(MemoryDrainer):
    """`MemoryDrainer.drain`, keeping what it takes (the bench script only counts)."""

    def drain(self, count: int, timeout: float | None = None, batch_size: int = 4096) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        taken = 0
        while taken < count:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            taken += len(_keep(self._channel.take(min(batch_size, count - taken), remaining)))
        return taken


class RecordingConsumer:
    """A `Consumer` whose polls keep what they return."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    @classmethod
    def from_config(cls, config: Any) -> RecordingConsumer:
        return cls(Consumer.from_config(config))

    def poll(self, *args: Any, **kwargs: Any) -> list[Message]:
        return _keep(self._consumer.poll(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def _keep(messages: list[Message]) -> list[Message]:
    Recorded.messages.extend(messages)
    return messages


@pytest.fixture
def recorded(bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Message]]:
    monkeypatch.setattr(bench, "MemoryDrainer", RecordingDrainer)
    monkeypatch.setattr(bench, "Consumer", RecordingConsumer)
    monkeypatch.setattr(Recorded, "messages", [])
    yield Recorded.messages


def check_documents(bench: ModuleType, got: list[Message], count: int, kind: bool) -> None:
    """Every document 0..count-1 once, in order, as sent; with its metadata when sent."""
    assert len(got) == count
    numbers = [m.json()["n"] for m in got]
    assert numbers == list(range(count))  # none lost, none twice, in order
    for message in (got[0], got[count // 2], got[-1]):  # the rest of the document, sampled
        assert message.json() == {**bench.DOC, "n": message.json()["n"]}
    expected = {"kind": "order.created"} if kind else {}
    assert all(m.metadata == expected for m in got)
    assert len({m.id for m in got}) == count


@pytest.mark.parametrize("scenario", ["route", "route-kind", "route-batch1", "send-json"])
def test_scenario_delivers_everything(
    bench: ModuleType, recorded: list[Message], scenario: str
) -> None:
    count = 20_000
    rate = bench.SCENARIOS[scenario](count)  # exits with a message if anything went missing
    print(f"{scenario}: {rate:,.0f} msg/s")
    check_documents(bench, recorded, count, kind=True)


@pytest.mark.parametrize("scenario", ["poll-payload", "poll-json"])
def test_polling_reads_everything(
    bench: ModuleType, recorded: list[Message], scenario: str
) -> None:
    count = 50_000
    rate = bench.SCENARIOS[scenario](count)
    print(f"{scenario}: {rate:,.0f} msg/s")
    check_documents(bench, recorded, count, kind=False)
