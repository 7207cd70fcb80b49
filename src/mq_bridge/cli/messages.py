"""mq-bridge send and mq-bridge consume: try an endpoint of a config file out.

    mq-bridge send bridge.yaml --publisher orders --json '{"id": 1}' '{"id": 2}'
    printf 'a\\nb\\n' | mq-bridge send bridge.yaml --route enrich     # into the route's input
    mq-bridge consume bridge.yaml --consumer audit --max 10
    mq-bridge consume bridge.yaml --route enrich --follow             # the route's output

The endpoint is a named entry of publishers: (send) or consumers: (consume), the
file itself when it is a bare endpoint, or with --route NAME a route's input (send:
feed the route) or output (consume: see what it produced). A memory endpoint lives in
one process, so it is of no use here; files and the twainmq log are (and the broker
endpoints this version has: mq-bridge validate says which names it knows).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from mq_bridge.cli.config_file import route_endpoint
from mq_bridge.consumer import Consumer
from mq_bridge.errors import ConfigError
from mq_bridge.message import Message
from mq_bridge.publisher import Publisher

__all__ = ["add_parsers", "consume_messages", "send_messages"]

_SEND_BATCH = 1000


def add_parsers(subparsers: Any) -> None:
    send = subparsers.add_parser(
        "send", help="publish messages (arguments, or one per stdin line)", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    send.add_argument("config", help="a YAML or JSON config file")
    which = send.add_mutually_exclusive_group()
    which.add_argument("--publisher", metavar="NAME", help="an entry of publishers:")
    which.add_argument("--route", metavar="NAME", help="send into this route's input")
    send.add_argument("messages", nargs="*", help="message payloads; none reads stdin lines")
    send.add_argument("--json", action="store_true", help="each message must be JSON")
    send.add_argument(
        "-m", "--metadata", action="append", default=[], metavar="KEY=VALUE",
        help="metadata on every message (repeat for several)",
    )  # fmt: skip
    send.set_defaults(run=send_messages, trailing="messages")

    consume = subparsers.add_parser(
        "consume", help="print messages, committing them after each batch",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    consume.add_argument("config", help="a YAML or JSON config file")
    which = consume.add_mutually_exclusive_group()
    which.add_argument("--consumer", metavar="NAME", help="an entry of consumers:")
    which.add_argument("--route", metavar="NAME", help="read this route's output")
    consume.add_argument("-n", "--max", type=_positive, help="stop after this many messages")
    consume.add_argument("-f", "--follow", action="store_true", help="wait for new messages")
    consume.add_argument(
        "--timeout-ms", type=_positive, default=1000,
        help="without --follow, stop after this long with nothing new (default 1000)",
    )  # fmt: skip
    consume.add_argument("--json", action="store_true", help="one JSON object per message")
    consume.add_argument(
        "--no-commit", action="store_true", help="do not acknowledge (peek; read again later)"
    )
    consume.set_defaults(run=consume_messages)


def send_messages(args: argparse.Namespace) -> int:
    metadata = _metadata(args.metadata)
    texts = args.messages or _stdin_lines()
    count = 0
    with _publisher(args) as publisher:
        batch: list[Message] = []
        for index, text in enumerate(texts):
            batch.append(_message(text, args.json, metadata, index))
            if len(batch) >= _SEND_BATCH:
                publisher.send_batch(batch)
                count, batch = count + len(batch), []
        publisher.send_batch(batch)
        count += len(batch)
    print(f"sent {count} message(s)", file=sys.stderr)
    return 0


def consume_messages(args: argparse.Namespace) -> int:
    remaining = args.max
    with _consumer(args) as consumer:
        while remaining is None or remaining > 0:
            wanted = 500 if remaining is None else min(500, remaining)
            batch = consumer.poll(max=wanted, timeout_ms=args.timeout_ms)
            for message in batch:
                print(_render(message, args.json), flush=args.follow)
            if batch and not args.no_commit:
                consumer.commit()
            if remaining is not None:
                remaining -= len(batch)
            if not batch and (consumer.exhausted or not args.follow):
                break
    return 0


def _publisher(args: argparse.Namespace) -> Publisher:
    if args.route:
        return Publisher.from_config(route_endpoint(args.config, args.route, "input"))
    return Publisher.from_file(args.config, args.publisher)


def _consumer(args: argparse.Namespace) -> Consumer:
    if args.route:
        return Consumer.from_config(route_endpoint(args.config, args.route, "output"))
    return Consumer.from_file(args.config, args.consumer)


def _stdin_lines() -> Iterator[str]:
    for line in sys.stdin:
        yield line.rstrip("\n")


def _metadata(items: list[str]) -> dict[str, str]:
    metadata = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise ConfigError(f"--metadata {item!r}: expected KEY=VALUE")
        metadata[key] = value
    return metadata


def _message(text: str, as_json: bool, metadata: Mapping[str, str], index: int) -> Message:
    if not as_json:
        return Message(text.encode(), metadata)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"message {index + 1} is not JSON ({error.msg}): {text[:60]!r}") from None
    return Message.from_json(value, metadata)


def _render(message: Message, as_json: bool) -> str:
    if not as_json:
        return message.payload.decode("utf-8", errors="replace")
    try:
        payload: Any = message.json()
    except ValueError:
        payload = message.payload.decode("utf-8", errors="replace")
    return json.dumps(
        {"id": message.id, "metadata": message.metadata, "payload": payload}, ensure_ascii=False
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value
