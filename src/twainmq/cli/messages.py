"""``twainmq produce | consume``: write messages from a shell, read them back.

Without ``-k`` or ``--key-separator``, ``produce`` does what Kafka's console producer does
with no key: the messages are spread over the partitions (round-robin here), under key 0
(``""`` for a ``charN`` topic), so any number of stdin lines fits any key type. A failure
part-way says how many messages were written and where it stopped.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from twainmq.cli.progress import Progress, add_progress_option
from twainmq.cli.render import render
from twainmq.cli.store import open_store
from twainmq.errors import InvalidKeyError, TwainMQError
from twainmq.producer import Producer

_FOLLOW_POLL_SECONDS = 0.5

#: (text, index) -> (key, message, partition or None for the key's partition)
KeyChooser = Callable[[str, int], tuple[Any, str, int | None]]


class ProduceStoppedError(TwainMQError):
    """``produce`` stopped part-way: what went wrong, where, and what was written before."""


def add_parsers(subparsers: Any) -> None:
    produce = subparsers.add_parser(
        "produce", help="write messages (arguments, or one per stdin line)"
    )
    produce.add_argument("topic")
    produce.add_argument("messages", nargs="*", help="messages; none reads stdin lines")
    produce.add_argument(
        "-k", "--key",
        help="key of every message (default: no key of yours: key 0, or '' for charN keys, "
        "and the messages are spread round-robin over the partitions)",
    )  # fmt: skip
    produce.add_argument(
        "--key-separator", help="each message is KEY<SEP>TEXT, e.g. --key-separator ':'"
    )
    produce.add_argument("--fsync", default="never", choices=["never", "batch", "always"])
    add_progress_option(produce)
    produce.set_defaults(run=produce_messages)

    consume = subparsers.add_parser("consume", help="print messages")
    consume.add_argument("topic")
    consume.add_argument("--from", dest="start_from", default="start", choices=["start", "now"])
    consume.add_argument("-f", "--follow", action="store_true", help="wait for new messages")
    consume.add_argument("-n", "--max", type=int, help="stop after this many messages")
    consume.add_argument("-g", "--group", help="consume as a member of this group (commits)")
    consume.add_argument(
        "--json", action="store_true",
        help="one JSON object per line; a bytes payload that is JSON appears as "
        '{"json": VALUE}, other text as {"text": ...}, binary data as {"bytes": HEX}',
    )  # fmt: skip
    consume.add_argument(
        "--on-gap", default="raise", choices=["raise", "skip"],
        help="offsets missing from a partition (damaged files): stop with an error (default) "
        "or skip them with a warning on stderr",
    )  # fmt: skip
    add_progress_option(consume)
    consume.set_defaults(run=consume_messages)


def produce_messages(args: argparse.Namespace) -> int:
    store = open_store(args)
    config = store.topic_config(args.topic)
    unit = "message" if args.messages else "line"
    texts = args.messages or _stdin_lines()
    choose = _key_chooser(args, config.key_type, config.partitions)
    progress = Progress(f"{unit}s written to {args.topic!r}", args.progress)
    try:
        with store.producer(args.topic, fsync=args.fsync) as producer:
            written = _write_all(producer, texts, choose, progress, unit)
    finally:
        progress.finish()
    print(f"wrote {written} message(s) to {args.topic!r}", file=sys.stderr)
    return 0


def _write_all(
    producer: Producer, texts: Iterable[str], choose: KeyChooser, progress: Progress, unit: str
) -> int:
    """Write every text; on a failure, say where it stopped and what was written before."""
    written = 0
    try:
        for index, text in enumerate(texts):
            producer.write_message(*choose(text, index))
            written += 1
            progress.update(written)
    except KeyboardInterrupt:
        progress.finish()
        print(f"twainmq: interrupted: {_written_so_far(written, unit, producer.topic)}",
              file=sys.stderr)  # fmt: skip
        raise
    except (TwainMQError, OSError, UnicodeError) as error:
        raise ProduceStoppedError(
            f"{_problem(error, unit, written + 1)}; stopped at {unit} {written + 1}: "
            f"{_written_so_far(written, unit, producer.topic)}"
        ) from None
    return written


def _problem(error: Exception, unit: str, number: int) -> str:
    if isinstance(error, UnicodeError):  # stdin decodes undecodable bytes as surrogates
        return f"{unit} {number} is not UTF-8 text"
    if isinstance(error, OSError):
        return f"{error.strerror or error}: {error.filename or ''}".rstrip(": ")
    return str(error)


def _written_so_far(written: int, unit: str, topic: str) -> str:
    if not written:
        return f"nothing was written to {topic!r}"
    if written == 1:
        return f"{unit} 1 was written to {topic!r}, nothing after it"
    return f"{unit}s 1..{written:,} were written to {topic!r}, nothing after them"


def _stdin_lines() -> Iterator[str]:
    for line in sys.stdin:
        yield line.rstrip("\n")


def _key_chooser(args: argparse.Namespace, key_type: str, partitions: int) -> KeyChooser:
    """How each text becomes (key, message, partition), from the options."""
    separator = args.key_separator
    if separator:

        def split(text: str, index: int) -> tuple[Any, str, int | None]:
            key, found, body = text.partition(separator)
            if not found:
                raise InvalidKeyError(f"no key separator {separator!r} in {text[:40]!r}")
            return _parse_key(key, key_type), body, None

        return split
    if args.key is not None:
        fixed = _parse_key(args.key, key_type)
        return lambda text, index: (fixed, text, None)
    no_key = "" if key_type.startswith("char") else 0
    return lambda text, index: (no_key, text, index % partitions)


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
    store = open_store(args)
    consumer = store.consumer(
        args.topic, start_from=args.start_from, group=args.group, on_gap=args.on_gap
    )
    limit = itertools.count() if args.max is None else range(args.max)
    progress = Progress(f"messages read from {args.topic!r}", args.progress, prints_to_stdout=True)
    try:
        for count in limit:
            message = consumer.poll(timeout=_FOLLOW_POLL_SECONDS if args.follow else 0)
            while message is None and args.follow:
                message = consumer.poll(timeout=_FOLLOW_POLL_SECONDS)
            if message is None:
                break
            print(render(message, args.json), flush=args.follow)
            if args.group:
                consumer.commit()
            progress.update(count + 1)
    finally:
        progress.finish()
        consumer.close()
    return 0
