"""The endpoints the contract suite runs on, one factory each.

To add an endpoint, write a factory that returns a `ContractCase` for a fresh, private
place (a unique topic, a file under `tmp_path`, ...) and add it to `CASES`:

    def file_case(tmp_path: Path) -> ContractCase:
        path = str(tmp_path / "log.jsonl")
        return ContractCase({"file": {"path": path}}, {"file": {"path": path}}, bounded=True)

Markers (e.g. ``pytest.mark.kafka``) go in `MARKS` so broker cases skip without a broker.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class ContractCase:
    """How to reach one endpoint as an output (writer) and as an input (reader of it)."""

    output_config: dict[str, Any]
    input_config: dict[str, Any]
    #: nack makes the batch available again at once (False: e.g. Kafka, on the next run)
    redelivers_on_nack: bool = True
    #: a bounded source (a file) sets `exhausted` once everything was handed out
    bounded: bool = False
    #: run after the test, even a failed one: deletes what the case created on a shared broker
    #: (a stream, queue or topic); see broker_cases.py
    cleanup: Callable[[], None] | None = None


def memory_case(tmp_path: Path) -> ContractCase:
    topic = f"contract-{uuid.uuid4().hex[:8]}"
    return ContractCase({"memory": {"topic": topic}}, {"memory": {"topic": topic}})


def memory_url_case(tmp_path: Path) -> ContractCase:
    topic = f"memory://contract-{uuid.uuid4().hex[:8]}"
    return ContractCase({"memory": {"url": topic}}, {"memory": {"url": topic, "capacity": 0}})


def file_consume_delete_case(tmp_path: Path) -> ContractCase:
    """consume mode forgets progress on restart unless acked records are deleted."""
    path = str(tmp_path / "contract" / "log.jsonl")
    reader = {"file": {"path": path, "mode": "consume", "delete": True}}
    return ContractCase({"file": {"path": path}}, reader, bounded=True)


def file_group_case(tmp_path: Path) -> ContractCase:
    path = str(tmp_path / "contract.log")
    reader = {"file": {"path": path, "format": "json", "mode": "group_subscribe", "group_id": "g"}}
    return ContractCase({"file": {"path": path, "format": "json"}}, reader)


def file_consume_case(tmp_path: Path) -> ContractCase:
    path = str(tmp_path / "contract.jsonl")
    reader = {"file": {"path": path, "mode": "consume", "delete": True}}
    return ContractCase({"file": {"path": path}}, reader, bounded=True)


def twain_case(tmp_path: Path) -> ContractCase:
    """One partition, so that the suite's order checks hold; the reader is a group member."""
    store = {"root": str(tmp_path / "store"), "topic": "contract", "create": {"partitions": 1}}
    return ContractCase({"twain": store}, {"twain": {**store, "group": "g"}})


CASES: dict[str, Callable[[Path], ContractCase]] = {
    "memory": memory_case,
    "memory-url": memory_url_case,
    "file-consume-delete": file_consume_delete_case,
    "file-group": file_group_case,
    "file-consume": file_consume_case,
    "twain": twain_case,
}

MARKS: dict[str, list[pytest.MarkDecorator]] = {}
