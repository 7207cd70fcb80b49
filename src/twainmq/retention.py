"""Retention: delete a partition's oldest sealed segments by total size and by age.

Runs under the partition lock when a segment rolls and when a partition is opened. The active
segment is never deleted. A segment's age is its file's modification time, which is the time
its last record was written. Readers still holding a deleted segment open finish reading it;
a reader that needs a deleted offset moves on to the oldest offset still kept. Before deleting,
retention records the first offset it keeps as the partition's durable log start
(``log_start.py``): segments missing above it were not deleted by retention.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .config import TopicConfig
from .log_start import read_log_start, write_log_start
from .segments import index_path, list_segments, segment_path


def apply_retention(directory: Path, config: TopicConfig, active_base: int) -> list[int]:
    """Delete the sealed segments retention no longer keeps; return their base offsets."""
    if config.retention_bytes is None and config.retention_seconds is None:
        return []
    bases = list_segments(directory)
    stats = {b: os.stat(segment_path(directory, b)) for b in bases}
    total = sum(s.st_size for s in stats.values())
    oldest_kept = time.time() - (config.retention_seconds or 0)
    doomed = []
    for base in bases:
        if base >= active_base:
            break
        too_big = config.retention_bytes is not None and total > config.retention_bytes
        too_old = config.retention_seconds is not None and stats[base].st_mtime < oldest_kept
        if not (too_big or too_old):
            break
        total -= stats[base].st_size
        doomed.append(base)
    if not doomed:
        return []
    kept = bases[len(doomed)]
    if read_log_start(directory) < kept:
        write_log_start(directory, kept)
    for base in doomed:
        os.unlink(segment_path(directory, base))
        try:
            os.unlink(index_path(directory, base))
        except FileNotFoundError:
            pass
    return doomed
