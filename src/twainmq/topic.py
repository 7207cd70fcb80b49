"""A topic opened by one producer or consumer: its config and its partitions' files."""

from __future__ import annotations

from pathlib import Path

from .config import TopicConfig
from .errors import InvalidPartitionError
from .keys import KeyType
from .partition import PartitionLog
from .payloads import MessageTypeRegistry


class OpenTopic:
    """The files of one topic, opened lazily partition by partition."""

    def __init__(self, root: Path, config: TopicConfig, registry: MessageTypeRegistry) -> None:
        self.config = config
        self.name = config.name
        self.directory = root / config.name
        self.key_type: KeyType = config.keys
        self.registry = registry
        self.partitions = config.partitions
        self._logs: dict[int, PartitionLog] = {}

    def check_partition(self, partition: object) -> int:
        """Return ``partition`` if the topic has it, else raise InvalidPartitionError."""
        if type(partition) is not int or not 0 <= partition < self.partitions:
            raise InvalidPartitionError(
                f"partition {partition!r} does not exist in topic {self.name!r} "
                f"(partitions 0 .. {self.partitions - 1})"
            )
        return partition

    def log(self, partition: int) -> PartitionLog:
        """Return the open PartitionLog of ``partition`` (recovering it on first use)."""
        log = self._logs.get(partition)
        if log is None:
            self.check_partition(partition)
            log = PartitionLog(self.directory / str(partition), self.config, partition)
            self._logs[partition] = log
        return log

    def opened_logs(self) -> list[PartitionLog]:
        """The partitions opened so far."""
        return list(self._logs.values())

    def end_offsets(self) -> dict[int, int]:
        """Return partition -> the offset the next message written there will get."""
        return {p: self.log(p).end_offset() for p in range(self.partitions)}

    def close(self) -> None:
        """Close every opened partition."""
        for log in self._logs.values():
            log.close()
        self._logs.clear()
