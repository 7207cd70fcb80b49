"""``twainmq list | create | describe | delete``: topics."""

from __future__ import annotations

import argparse
from typing import Any

from twainmq.cli.store import open_store
from twainmq.errors import TopicExistsError


def add_parsers(subparsers: Any) -> None:
    listing = subparsers.add_parser("list", help="list topics with partitions and message counts")
    listing.set_defaults(run=list_topics)

    create = subparsers.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument("-p", "--partitions", type=int, default=1)
    create.add_argument("-k", "--key-type", default="u16", help="u8, u16, u32, u64 or charN")
    create.add_argument("--segment-bytes", type=int, help="roll segments at this size")
    create.add_argument("--retention-bytes", type=int, help="keep at most this much per partition")
    create.add_argument("--retention-seconds", type=float, help="drop segments older than this")
    create.add_argument(
        "--if-not-exists", action="store_true",
        help="a topic of that name is no error: leave it as it is (exit 0)",
    )  # fmt: skip
    create.set_defaults(run=create_topic)

    describe = subparsers.add_parser("describe", help="partitions, segments, offsets and bytes")
    describe.add_argument("topic")
    describe.set_defaults(run=describe_topic)

    delete = subparsers.add_parser("delete", help="delete a topic and its messages")
    delete.add_argument("topic")
    delete.set_defaults(run=delete_topic)


def list_topics(args: argparse.Namespace) -> int:
    store = open_store(args)
    names = store.list_topics()
    if not names:
        print(f"no topics in {store.root_dir}")
        return 0
    print(f"{'TOPIC':<32} {'PARTITIONS':>10} {'MESSAGES':>12} {'BYTES':>14}")
    for name in names:
        description = store.describe_topic(name)
        print(
            f"{name:<32} {description.config.partitions:>10} "
            f"{description.messages:>12} {description.bytes:>14}"
        )
    return 0


def create_topic(args: argparse.Namespace) -> int:
    settings = {
        key: value
        for key, value in (
            ("segment_bytes", args.segment_bytes),
            ("retention_bytes", args.retention_bytes),
            ("retention_seconds", args.retention_seconds),
        )
        if value is not None
    }
    store = open_store(args, create=True)
    try:
        store.create_topic(
            args.topic, key_type=args.key_type, partitions=args.partitions, **settings
        )
    except TopicExistsError:
        if not args.if_not_exists:
            raise
        config = store.topic_config(args.topic)
        print(
            f"topic {args.topic!r} exists already ({config.partitions} partition(s), "
            f"{config.key_type} keys): left as it is"
        )
        return 0
    print(f"created topic {args.topic!r}: {args.partitions} partition(s), {args.key_type} keys")
    return 0


def describe_topic(args: argparse.Namespace) -> int:
    description = open_store(args).describe_topic(args.topic)
    config = description.config
    print(f"topic {config.name}: key type {config.key_type}, {config.partitions} partition(s)")
    types = ", ".join(config.message_types) or "any (str, bytes, registered dataclasses)"
    print(f"  message types: {types}")
    print(f"  messages kept: {description.messages}, bytes: {description.bytes}")
    for partition in description.partitions:
        print(
            f"  partition {partition.partition}: offsets {partition.start_offset}.."
            f"{partition.end_offset} ({partition.messages} messages, {partition.bytes} bytes, "
            f"{len(partition.segments)} segment(s))"
        )
        for segment in partition.segments:
            print(f"    segment {segment.base_offset:>12}  {segment.bytes:>12} B  {segment.path}")
        for problem in partition.problems:
            print(f"    DAMAGED: {problem}")
    if any(p.problems for p in description.partitions):
        print(f"  damaged: `twainmq check {config.name}` verifies every record and index")
    return 0


def delete_topic(args: argparse.Namespace) -> int:
    open_store(args).delete_topic(args.topic)
    print(f"deleted topic {args.topic!r}")
    return 0
