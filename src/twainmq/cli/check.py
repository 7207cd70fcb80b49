"""``twainmq check TOPIC``: verify every record, index and head of a topic, and its groups.

Prints, per partition, the offsets its head counts and the offsets a consumer can read, then
every problem found, naming the file; exits 1 if any file is damaged (a consumer would stop
or skip), 0 if every offset can be read (problems repaired on open, such as a missing index,
are listed but do not count). Read-only: safe while producers and consumers run, though
records written meanwhile may or may not be counted.
"""

from __future__ import annotations

import argparse
from typing import Any

from twainmq.cli.store import open_store
from twainmq.groups import GroupFileCorruptError, list_groups
from twainmq.groups.commits import read_commits
from twainmq.groups.state import load_state
from twainmq.verify import PartitionCheck, check_topic


def add_parsers(subparsers: Any) -> None:
    check = subparsers.add_parser(
        "check", help="verify every record, index and head of a topic; exit 1 if damaged"
    )
    check.add_argument("topic")
    check.set_defaults(run=check_command)


def check_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    config = store.topic_config(args.topic)  # a damaged .twc raises, naming it
    checks = check_topic(store.root_dir, config)
    print(f"topic {config.name}: {config.partitions} partition(s), config {config.name}.twc ok")
    damaged = sum(_print_partition(check) for check in checks)
    damaged += _check_groups(store.root_dir, config.name)
    if damaged:
        print(f"twainmq check: topic {config.name} is DAMAGED ({damaged} problem(s))")
        return 1
    print(f"twainmq check: topic {config.name} is ok: every offset can be read")
    return 0


def _print_partition(check: PartitionCheck) -> int:
    state = "DAMAGED" if check.damaged else "ok"
    readable = (
        "" if not check.damaged else f", readable {check.start_offset}..{check.readable_end} only"
    )
    print(
        f"  partition {check.partition}: offsets {check.start_offset}..{check.end_offset}"
        f" ({check.records} records{readable}): {state}"
    )
    for problem in check.problems:
        print(f"    {problem}")
    return sum(1 for problem in check.problems if not problem.repairable)


def _check_groups(root: Any, topic: str) -> int:
    damaged = 0
    for paths in list_groups(root):
        if paths.topic != topic:
            continue
        try:
            state = load_state(paths)
            read_commits(paths, state)
        except GroupFileCorruptError as exc:
            print(f"  group {paths.group}: DAMAGED")
            print(f"    {exc.path}: {exc.reason}")
            damaged += 1
        else:
            print(f"  group {paths.group}: ok")
    return damaged
