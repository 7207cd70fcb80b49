"""The settings of a route besides its input and output: one declaration, as for endpoints."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mq_bridge.config.declarations import MAX_MILLISECONDS, Options

__all__ = ["RouteOptions"]


class RouteOptions(Options):
    """How a route reads, handles and commits batches."""

    # 512, not the seed's 1: a batch is taken as soon as one message is there, so a large
    # cap costs no latency and amortises per-batch work (docs/compat.md).
    batch_size: int = Field(
        512,
        ge=1,
        description="Most messages handled per batch. The route waits for one message, "
        "then takes whatever else is ready up to this many, so a large value costs no "
        "latency at low load and amortises per-batch work at high load. Defaults to 512.",
    )
    concurrency: int = Field(
        1, ge=1, description="Batches handled in parallel; commits stay in source order."
    )
    commit_concurrency_limit: int = Field(
        4096,
        ge=1,
        description="Most batch commits queued or running at once; at the limit the route "
        "stops reading until one finishes.",
    )
    startup_timeout_ms: int = Field(
        5000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="How long start() waits for the endpoints to connect; a server that "
        "refuses connections meanwhile is tried again with backoff until then.",
    )
    reconnect_interval_ms: int = Field(
        5000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="The longest wait between two attempts while an output is unreachable, "
        "an input reconnects or a message is retried (the backoff grows from 10 ms to this).",
    )
    empty_batch_delay_ms: int = Field(
        10,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Pause after an empty receive, against hot polling.",
    )
    on_error: Literal["redeliver", "drop"] = Field(
        "redeliver",
        description="What happens to a message whose handler raised (anything but "
        "NonRetryableError, which is always dead-lettered or dropped) or that the output "
        "refused: 'redeliver' keeps it unacknowledged and tries it again with backoff while "
        "the route reports itself unhealthy (a source that cannot redeliver drops it); "
        "'drop' acknowledges it, counted and logged. A dlq middleware takes it first "
        "either way. See docs/delivery.md.",
    )
    allow_fault_injection: bool = Field(
        False, description="Allow fault-injection middleware such as random_panic."
    )
    description: str = Field("", description="What the route is for, for people reading it.")
