"""Exactly-once for a route whose input and output are twain topics of one store.

The input's `exactly_once_output` names the output topic. A route writes a batch's output,
then the input commits the batch; a crash between the two makes the next owner of those input
partitions read the batch again, and write its output a second time. To prevent that:

1. every message the input hands out carries its source, ``mqb.twain.eos`` =
   ``"<group>:<partition>:<offset>"`` (the output's envelope keeps metadata, so the record
   written for it carries it too; a handler must return the message, or one with its
   metadata, one output per input);
2. with each commit the input saves, per input partition it owns, a **bound**: output end
   offsets read before any not-yet-committed batch of that partition was handed out (so every
   output written for it lies at or after the bound), in
   ``<group dir>/exactly-once/<output topic>/<partition>.json``;
3. when the input takes partitions (start, rebalance, after a crash of another member), it
   reads the output from the saved bounds to its end and collects the sources of these
   partitions at or after their committed offsets: messages whose output is already there.
   It skips them (they count as acked) instead of handing them out again.

The bound never moves past an output record the input still has to skip, and is saved after
the commit it goes with (a crash in between leaves an older, lower bound: more to read, never
less). Cost: one metadata field per message, the output's end offsets read per batch (a
lock-free head read per partition), a small file write per owned partition at most every
100 ms, and a read of the output written since the last save when partitions are taken.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mq_bridge.endpoints.twain.codec import decode_batch

__all__ = ["SOURCE_KEY", "OutputLedger"]

SOURCE_KEY = "mqb.twain.eos"
_SAVE_INTERVAL = 0.1
_SCAN_BATCH = 4096


class OutputLedger:
    """What one input (a group member) knows about the output its route already wrote."""

    def __init__(self, store: Any, group: str, input_topic: str, output_topic: str) -> None:
        self._store = store
        self._group = group
        self._output = output_topic
        self._directory = (
            Path(store.root_dir) / ".groups" / input_topic / group / "exactly-once" / output_topic
        )
        self._prefix = f"{group}:"
        # (input partition, offset) -> (output partition, offset) of records to skip
        self.written: dict[tuple[int, int], tuple[int, int]] = {}
        self._next_save = 0.0
        self._heads: Any = None  # a plain consumer of the output, for its end offsets

    def source(self, partition: int, offset: int) -> dict[str, str]:
        """The metadata that marks a message handed out from ``partition`` at ``offset``."""
        return {SOURCE_KEY: f"{self._group}:{partition}:{offset}"}

    def ends(self) -> dict[int, int]:
        """The output's end offsets now (lock-free; none before the output made its topic)."""
        if self._heads is None:
            if not self._store.topic_exists(self._output):
                return {}
            # Kept open: its end_offsets() reads the mapped heads (opening the topic per
            # batch, as Twain.end_offsets does, cost more than the rest of the route).
            self._heads = self._store.consumer(self._output, "now")
        return dict(self._heads.end_offsets())

    def close(self) -> None:
        """Let go of the output's files."""
        heads, self._heads = self._heads, None
        if heads is not None:
            heads.close()

    def take(self, partitions: Iterable[int], committed: Mapping[int, int]) -> None:
        """Partitions were taken: learn which of their messages since ``committed`` have
        output already (reads the output from the saved bounds)."""
        taken = set(partitions)
        if not taken:
            return
        start: dict[int, int] = {}
        for partition in taken:
            for out_partition, offset in self._load(partition).items():
                start[out_partition] = min(offset, start.get(out_partition, offset))
        ends = self.ends()
        if not ends:
            return  # nothing written yet
        start = {p: start.get(p, 0) for p in ends}
        for key, where in self._scan(start, ends):
            partition, offset = key
            if partition in taken and offset >= committed.get(partition, 0):
                self.written[key] = where

    def skip(self, partition: int, offset: int) -> bool:
        """True (and forgotten) if the message at ``partition``/``offset`` has output."""
        return self.written.pop((partition, offset), None) is not None

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions were given up: their next owner reads the output itself."""
        gone = set(partitions)
        self.written = {k: v for k, v in self.written.items() if k[0] not in gone}

    def save(self, partitions: Iterable[int], oldest_unacked: Mapping[int, int] | None) -> None:
        """Save the bound of ``partitions`` (call after their commit). ``oldest_unacked``:
        the output ends read when the oldest batch still not acked was handed out."""
        now = time.monotonic()
        if now < self._next_save:
            return
        self._next_save = now + _SAVE_INTERVAL
        bound = dict(oldest_unacked) if oldest_unacked is not None else self.ends()
        for (_, _), (out_partition, offset) in self.written.items():
            bound[out_partition] = min(offset, bound.get(out_partition, offset))
        self._directory.mkdir(parents=True, exist_ok=True)
        data = json.dumps({str(p): o for p, o in sorted(bound.items())}).encode()
        for partition in partitions:
            path = self._directory / f"{partition}.json"
            temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            temporary.write_bytes(data)
            os.replace(temporary, path)

    def _load(self, partition: int) -> dict[int, int]:
        """The saved bound of ``partition`` (none saved: the output from its start)."""
        try:
            document = json.loads((self._directory / f"{partition}.json").read_bytes())
            return {int(p): int(o) for p, o in document.items()}
        except FileNotFoundError:
            return {}
        except (ValueError, AttributeError, TypeError):
            return {}  # damaged: read the output from its start (slower, still right)

    def _scan(
        self, start: Mapping[int, int], ends: Mapping[int, int]
    ) -> Iterable[tuple[tuple[int, int], tuple[int, int]]]:
        positions = {p: min(o, ends.get(p, o)) for p, o in start.items()}
        with self._store.consumer(self._output) as reader:
            reader.assign(positions)
            while True:
                records = reader.poll_many(_SCAN_BATCH)
                if not records:
                    return
                messages, _, _ = decode_batch(records, self._output)
                for message, record in zip(messages, records, strict=True):
                    marker = message.metadata_view.get(SOURCE_KEY)
                    if marker is None or not marker.startswith(self._prefix):
                        continue
                    _, partition, offset = marker.rsplit(":", 2)
                    yield (int(partition), int(offset)), (record.partition, record.offset)
