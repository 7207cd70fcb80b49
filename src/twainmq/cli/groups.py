"""``twainmq groups list | describe | reset``: consumer groups seen from outside.

    twainmq groups list
    twainmq groups describe TOPIC GROUP
    twainmq groups reset TOPIC GROUP (--to-start | --to-end | --to-offset N | --to-time WHEN)
                                     [--partition P ...]

Nothing here joins a group. ``reset`` needs an inactive group (no live member).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from twainmq.cli.store import open_store
from twainmq.errors import InvalidOptionError, OffsetOutOfRangeError, UnknownTopicError
from twainmq.groups import (
    GroupDescription,
    GroupFileCorruptError,
    GroupNotFoundError,
    GroupPaths,
    describe_group,
    list_groups,
    reset_offsets,
)
from twainmq.twain import Twain


def add_parsers(subparsers: Any) -> None:
    groups = subparsers.add_parser("groups", help="list, describe and reset consumer groups")
    commands = groups.add_subparsers(dest="groups_command", metavar="ACTION")
    commands.required = True

    listing = commands.add_parser("list", help="every group with its topic, members and lag")
    listing.set_defaults(run=list_command)

    describe = commands.add_parser("describe", help="members, assignment, commits and lag")
    describe.add_argument("topic")
    describe.add_argument("group")
    describe.set_defaults(run=describe_command)

    reset = commands.add_parser("reset", help="set the committed offsets of an inactive group")
    reset.add_argument("topic")
    reset.add_argument("group")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-start", action="store_true", help="the oldest message kept")
    target.add_argument("--to-end", action="store_true", help="after the newest message")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N in each partition")
    target.add_argument(
        "--to-time", metavar="WHEN", help="first message at/after WHEN (ISO 8601, UTC if no zone)"
    )
    reset.add_argument(
        "--partition", type=int, action="append", metavar="P", help="only P (repeatable)"
    )
    reset.set_defaults(run=reset_command)


def list_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    found = list_groups(store.root_dir)
    if not found:
        print(f"no consumer groups in {store.root_dir}")
        return 0
    print(f"{'TOPIC':<24} {'GROUP':<24} {'GENERATION':>10} {'LIVE MEMBERS':>12} {'LAG':>12}")
    for paths in found:
        ends = _end_offsets_or_none(store, paths.topic)
        try:
            described = describe_group(paths, ends or {})
        except GroupFileCorruptError as error:  # one damaged group does not hide the others
            print(f"{paths.topic:<24} {paths.group:<24} DAMAGED: {error.path}: {error.reason}")
            continue
        live = sum(1 for m in described.members if m.status.value != "dead")
        lag = sum(p.lag for p in described.partitions.values()) if ends is not None else "-"
        print(
            f"{paths.topic:<24} {paths.group:<24} {described.generation:>10} {live:>12} {lag:>12}"
        )
    return 0


def describe_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    paths = GroupPaths.of(store.root_dir, args.topic, args.group)
    _print_description(describe_group(paths, store.end_offsets(args.topic)))
    return 0


def _print_description(described: GroupDescription) -> None:
    state = "active" if described.active else "inactive"
    print(
        f"group {described.group} on topic {described.topic}: generation "
        f"{described.generation}, {state}"
    )
    print(f"  members: {len(described.members) or 'none'}")
    for member in described.members:
        partitions = ",".join(map(str, member.partitions)) or "-"
        print(
            f"    {member.member_id:<20} pid {member.pid} on {member.host}  "
            f"{member.status.value:<5}  partitions {partitions}"
        )
    print(f"  {'PARTITION':>9} {'OWNER':<20} {'END':>12} {'COMMITTED':>12} {'LAG':>12}")
    for partition, lag in described.partitions.items():
        owner = described.owners.get(partition, "-")
        committed = "-" if lag.committed is None else lag.committed
        print(f"  {partition:>9} {owner:<20} {lag.end_offset:>12} {committed:>12} {lag.lag:>12}")


def reset_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    paths = GroupPaths.of(store.root_dir, args.topic, args.group)
    if not paths.directory.is_dir():
        raise GroupNotFoundError(args.topic, args.group)
    targets = _reset_targets(store, args)
    wanted = _chosen_partitions(targets, args.partition)
    offsets = {p: targets[p] for p in wanted}
    reset_offsets(paths, offsets, partitions=len(targets))
    shown = ", ".join(f"{p}:{o}" for p, o in sorted(offsets.items()))
    print(f"reset group {args.group!r} on {args.topic!r}: {shown}")
    return 0


def _reset_targets(store: Twain, args: argparse.Namespace) -> dict[int, int]:
    """Partition -> the offset the reset asks for, for every partition of the topic."""
    ends = store.end_offsets(args.topic)
    if args.to_end:
        return ends
    with store.consumer(args.topic) as reader:
        if args.to_start:
            return reader.beginning_offsets()
        if args.to_time is not None:
            return reader.offsets_for_timestamp(_parse_time(args.to_time))
    return {p: _offset_within(p, args.to_offset, end) for p, end in ends.items()}


def _offset_within(partition: int, offset: int, end: int) -> int:
    if not 0 <= offset <= end:
        raise OffsetOutOfRangeError(
            f"--to-offset {offset} is outside partition {partition} (0 .. {end})"
        )
    return offset


def _chosen_partitions(targets: Mapping[int, int], chosen: list[int] | None) -> list[int]:
    if chosen is None:
        return sorted(targets)
    unknown = sorted(set(chosen) - set(targets))
    if unknown:
        raise InvalidOptionError(
            f"--partition {unknown[0]} does not exist (partitions 0 .. {len(targets) - 1})"
        )
    return sorted(set(chosen))


def _parse_time(text: str) -> datetime:
    try:
        # Python 3.10's fromisoformat does not know the "Z" suffix.
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise InvalidOptionError(
            f"--to-time {text!r} is not an ISO 8601 time (e.g. 2026-01-31T12:00:00Z)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def _end_offsets_or_none(store: Twain, topic: str) -> dict[int, int] | None:
    try:
        return store.end_offsets(topic)
    except UnknownTopicError:  # the topic was deleted; its group directory lingers
        return None
