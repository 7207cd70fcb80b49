"""Environment knobs, read once when a route starts (see docs/design.md, "Runtime knobs").

MQ_BRIDGE_PY_HANDLER_EXECUTOR     worker | direct      (default direct: see docs/design.md)
MQ_BRIDGE_PY_HANDLER_CONCURRENCY  max in-flight handler batches, 0 = no limit (CPU count)
MQ_BRIDGE_PY_GC_MODE              default | count | off
MQ_BRIDGE_PY_GC_THRESHOLD         messages between collections in count mode (100000)

MQB_SOURCE_METADATA (source cursor fields, `mqb.src.*`) is read by
`mq_bridge.endpoints.kit.source_metadata` and handed to endpoints as
`BuildContext.source_metadata`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from mq_bridge.errors import ConfigError

__all__ = ["RuntimeKnobs", "read_knobs"]

Executor = Literal["worker", "direct"]
GcMode = Literal["default", "count", "off"]


@dataclass(frozen=True)
class RuntimeKnobs:
    """The environment's tuning choices for routes."""

    executor: Executor = "direct"
    handler_concurrency: int = 0
    gc_mode: GcMode = "default"
    gc_threshold: int = 100_000


def read_knobs() -> RuntimeKnobs:
    """The knobs from the environment; a bad value raises `ConfigError` naming the variable."""
    return RuntimeKnobs(
        executor=_choice("MQ_BRIDGE_PY_HANDLER_EXECUTOR", ("worker", "direct"), "direct"),  # type: ignore[arg-type]
        handler_concurrency=_count("MQ_BRIDGE_PY_HANDLER_CONCURRENCY", os.cpu_count() or 1),
        gc_mode=_choice("MQ_BRIDGE_PY_GC_MODE", ("default", "count", "off"), "default"),  # type: ignore[arg-type]
        gc_threshold=_count("MQ_BRIDGE_PY_GC_THRESHOLD", 100_000),
    )


def _choice(name: str, allowed: tuple[str, ...], default: str) -> str:
    value = os.environ.get(name, "").strip().lower() or default
    if value not in allowed:
        raise ConfigError(f"must be one of {', '.join(allowed)}, got {value!r}", path=name)
    return value


def _count(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"must be a whole number, got {raw!r}", path=name) from None
    if value < 0:
        raise ConfigError(f"must not be negative, got {value}", path=name)
    return value
