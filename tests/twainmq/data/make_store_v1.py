"""Writes ``store_v1/``: a store as twainmq wrote it before checksums (issue 10).

Run with the previous version on the path, e.g. from a worktree of the commit before
checksums::

    git worktree add /tmp/before e919b48
    PYTHONPATH=/tmp/before/src python tests/twainmq/data/make_store_v1.py /tmp/store_v1

It holds legacy heads ("TWHEAD01"), 16-byte index entries without CRC, a topic whose oldest
segments retention deleted (no log-start file) and a version-1 consumer group with commits
without checksums. ``test_checksums.py`` opens a copy and checks the upgrade.
"""

from __future__ import annotations

import sys

from twainmq import Twain


def main(root: str) -> None:
    tmq = Twain(root)
    # Two partitions of small segments with a dense index: many sealed segments and indexes.
    tmq.create_topic("events", "u16", partitions=2, segment_bytes=1024, index_interval_bytes=128)
    with tmq.producer("events") as producer:
        for number in range(200):
            producer.write_message(number % 7, f"event {number:04d} " + "x" * 30)
    # Retention deleted the oldest segments of this one: its log start is above 0.
    tmq.create_topic(
        "kept", "u16", segment_bytes=1024, index_interval_bytes=128, retention_bytes=3000
    )
    with tmq.producer("kept") as producer:
        for number in range(200):
            producer.write_message(1, f"kept {number:04d} " + "y" * 30)
    # A group that committed 60 in each partition of "events".
    with tmq.consumer("events", group="g") as consumer:
        for _ in range(120):
            assert consumer.poll(timeout=1) is not None
        consumer.commit()


if __name__ == "__main__":
    main(sys.argv[1])
