"""``twainmq produce | consume``: write messages from a shell, read them back."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, is_dataclass
from typing import Any

from twainmq.errors import InvalidKeyError
from twainmq.message import Message
from twainmq.twain import Twain

_FOLLOW_POLL_SECONDS = 0.5


def add_parsers(subparsers: Any) -> None:
    produce = subparsers.add_parser(
        "produce", help="write messages (arguments, or one per stdin line)"
    )
    produce.add_argument("topic")
    produce.add_argument("messages", nargs="*", help="messages; none reads stdin lines")
    produce.add_argument("-k", "--key", help="key of every message (default: 0, 1, 2, ...)")
    produce.add_argument(
        "--key-separator", help="each message is KEY<SEP>TEXT, e.g. --key-separator ':'"
    )
    produce.add_argument("--fsync", default="never", choices=["never", "batch", "always"])
    produce.set_defaults(run=produce_messages)

    consume = subparsers.add_parser("consume", help="print messages")
    consume.add_argument("topic")
    consume.add_argument("--from", dest="start_from", default="start", choices=["start", "now"])
    consume.add_argument("-f", "--follow", action="store_true", help="wait for new messages")
    consume.add_argument("-n", "--max", type=int, help="stop after this many messages")
    consume.add_argument("-g", "--group", help="consume as a member of this group (commits)")
    consume.add_argument("--json", action="store_true", help="one JSON object per line")
    consume.set_defaults(run=consume_messages)


def produce_messages(args: argparse.Namespace) -> int:
    store = Twain(args.root)
    key_type = store.topic_config(args.topic).key_type
    texts = args.messages or _stdin_lines()
    count = 0
    with store.producer(args.topic, fsync=args.fsync) as producer:
        for index, text in enumerate(texts):
            key, body = _split_key(text, args, index)
            producer.write_message(_parse_key(key, key_type), body)
            count += 1
    print(f"wrote {count} message(s) to {args.topic!r}", file=sys.stderr)
    return 0


def _stdin_lines() -> Iterator[str]:
    for line in sys.stdin:
        yield line.rstrip("\n")


def _split_key(text: str, args: argparse.Namespace, index: int) -> tuple[str, str]:
    if args.key_separator:
        key, separator, body = text.partition(args.key_separator)
        if not separator:
            raise InvalidKeyError(f"line {index + 1} has no key separator {args.key_separator!r}")
        return key, body
    return (args.key if args.key is not None else str(index)), text


def _parse_key(text: str, key_type: str) -> int | str:
    if key_type.startswith("char"):
        return text
    try:
        return int(text, 0)
    except ValueError:
        raise InvalidKeyError(f"key {text!r} is not an integer ({key_type} topic)") from None


def consume_messages(args: argparse.Namespace) -> int:
    if args.max is not None and args.max < 1:
        raise InvalidKeyError(f"--max {args.max} must be at least 1")
    store = Twain(args.root)
    consumer = store.consumer(args.topic, start_from=args.start_from, group=args.group)
    limit = itertools.count() if args.max is None else range(args.max)
    try:
        for _ in limit:
            message = consumer.poll(timeout=_FOLLOW_POLL_SECONDS if args.follow else 0)
            while message is None and args.follow:
                message = consumer.poll(timeout=_FOLLOW_POLL_SECONDS)
            if message is None:
                break
            print(_render(message, args.json), flush=args.follow)
            if args.group:
                consumer.commit()
    finally:
        consumer.close()
    return 0


def _render(message: Message, as_json: bool) -> str:
    body = message.message
    if as_json:
        return json.dumps(
            {
                "partition": message.partition,
                "offset": message.offset,
                "key": message.key,
                "timestamp": message.timestamp_us / 1e6,
                "message": _jsonable(body),
            },
            ensure_ascii=False,
        )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(message.timestamp_us / 1e6))
    return f"{message.partition}:{message.offset}\t{message.key}\t{stamp}Z\t{_text(body)}"


def _jsonable(body: Any) -> Any:
    if isinstance(body, bytes):
        return {"bytes": body.hex()}
    if is_dataclass(body) and not isinstance(body, type):
        return {"type": type(body).__name__, **asdict(body)}
    return body


def _text(body: Any) -> str:
    if isinstance(body, str):
        return body
    if isinstance(body, bytes):
        return f"<{len(body)} bytes> {body[:32].hex()}{'…' if len(body) > 32 else ''}"
    return repr(body)
