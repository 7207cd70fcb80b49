"""Writes ``store_v2/``: a store as twainmq wrote it before the group commit log (issue 15).

Run with the previous version on the path, e.g. from a copy of the tree before the commit log::

    PYTHONPATH=/tmp/before15/src python tests/twainmq/data/make_store_v2.py /tmp/store_v2

It holds a version-2 consumer group (checksummed ``state.json`` and one checksummed commit
file per partition, ``commits/<p>.<epoch>.json``): partitions 0..2 committed, partition 3 never
(``{"offset": null}``). ``test_group_commit_log.py`` opens a copy and checks the migration.
"""

from __future__ import annotations

import sys

from twainmq import Twain


def main(root: str) -> None:
    tmq = Twain(root)
    tmq.create_topic("orders", "u16", partitions=4)
    with tmq.producer("orders", partitioner=lambda key, partitions: key % partitions) as producer:
        for number in range(80):
            producer.write_message(number % 4, f"order {number:04d}")
    with tmq.consumer("orders", group="billing") as consumer:
        consumer.commit({0: 10, 1: 20, 2: 5})


if __name__ == "__main__":
    main(sys.argv[1])
