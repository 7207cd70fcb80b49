"""Consumer lag: how far a group is behind the end of each partition."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionLag:
    """Progress of one partition.

    ``lag`` counts the messages after the committed offset (Kafka's group
    lag); with no commit yet it counts from ``position`` (where this consumer
    reads next), or from offset 0 if nobody reads the partition.
    """

    partition: int
    end_offset: int
    committed: int | None
    position: int | None = None

    @property
    def lag(self) -> int:
        """Messages not yet committed (never negative)."""
        done = self.committed if self.committed is not None else self.position
        return max(0, self.end_offset - (done or 0))


def partition_lags(
    end_offsets: Mapping[int, int],
    committed: Mapping[int, int],
    positions: Mapping[int, int] | None = None,
) -> dict[int, PartitionLag]:
    """Lag of every partition in ``end_offsets``."""
    positions = positions or {}
    return {
        p: PartitionLag(p, end, committed.get(p), positions.get(p))
        for p, end in sorted(end_offsets.items())
    }
