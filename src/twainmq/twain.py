"""``Twain``: one message store rooted at a directory, and ``multi_poll``."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .atomic_files import fsync_directory
from .config import (
    CONFIG_SUFFIX,
    TopicConfig,
    check_topic_name,
    config_path,
    read_config,
    write_new_config,
)
from .consumer import START_FROM, Consumer
from .describe import TopicDescription, describe_topic
from .errors import InvalidOptionError, TopicConfigError, UnknownTopicError
from .groups.consumer import join_group
from .groups.layout import GROUPS_DIR
from .keys import Partitioner
from .message import Message
from .payloads import MessageTypeRegistry, message_type_name
from .producer import Producer
from .topic import OpenTopic

TOPIC_SETTINGS = (
    "segment_bytes",
    "index_interval_bytes",
    "max_message_bytes",
    "retention_bytes",
    "retention_seconds",
)


class Twain:
    """A TwainMQ message store: every topic, partition and group lives under ``root``.

    Topics are ``<root>/<topic>.twc`` (config) plus ``<root>/<topic>/`` (partitions). Any
    number of ``Twain`` objects, in any number of processes, may use one root at once.
    Dataclass types registered here are known to its producers and consumers.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)
        self._root.mkdir(parents=True, exist_ok=True)
        self._registry = MessageTypeRegistry()

    @property
    def root_dir(self) -> Path:
        """The directory holding this store."""
        return self._root

    def register_msg_cls(self, message_cls: type) -> type:
        """Register a dataclass for messages (at any time); returns it, so it can decorate."""
        self._registry.register(message_cls)
        return message_cls

    def create_topic(
        self,
        topic_name: str,
        key_type: str = "u16",
        partitions: int = 1,
        message_types: Sequence[str | type] | None = None,
        **settings: Any,
    ) -> TopicConfig:
        """Create a topic; raise TopicExistsError if it exists.

        ``message_types`` optionally limits which dataclass types the topic accepts (names or
        classes). ``settings``: ``segment_bytes``, ``index_interval_bytes``,
        ``max_message_bytes``, ``retention_bytes``, ``retention_seconds``.
        """
        unknown = sorted(set(settings) - set(TOPIC_SETTINGS))
        if unknown:
            raise TopicConfigError(
                f"unknown topic setting {unknown[0]!r}: use {', '.join(TOPIC_SETTINGS)}"
            )
        if isinstance(message_types, (str, bytes)):
            raise TopicConfigError(
                f"message_types {message_types!r} must be a list of type names or classes"
            )
        names = [_message_type(t) for t in message_types or []]
        config = TopicConfig(topic_name, key_type, partitions, names, **settings)
        directory = self._root / topic_name
        if directory.exists() and not self.topic_exists(topic_name):
            # Left by a delete that stopped half-way: not this topic's. Removed before the
            # config appears: from then on other processes may already use the directory.
            _remove_tree(directory)
        write_new_config(self._root, config)
        directory.mkdir(exist_ok=True)  # a user of the new topic may have made it already
        return config

    def topic_exists(self, topic_name: str) -> bool:
        """Whether the topic exists."""
        return config_path(self._root, topic_name).is_file()

    def list_topics(self) -> list[str]:
        """Names of all topics, sorted."""
        names = (n[: -len(CONFIG_SUFFIX)] for n in os.listdir(self._root))
        return sorted(n for n in names if n and not n.startswith(".") and self._is_config(n))

    def _is_config(self, name: str) -> bool:
        return (self._root / f"{name}{CONFIG_SUFFIX}").is_file()

    def topic_config(self, topic_name: str) -> TopicConfig:
        """The topic's settings, read from its ``.twc`` file."""
        return read_config(self._root, topic_name)

    def delete_topic(self, topic_name: str) -> None:
        """Delete a topic and all its messages, without asking.

        Producers and consumers of the topic still open elsewhere must be closed first.
        """
        path = config_path(self._root, topic_name)
        try:
            path.unlink()
        except FileNotFoundError:
            raise UnknownTopicError(f"topic {topic_name!r} does not exist (no {path})") from None
        fsync_directory(self._root)
        directory = self._root / topic_name
        if directory.exists():
            _remove_tree(directory)
        # Its groups' commits would otherwise apply to a new topic of the same name.
        shutil.rmtree(self._root / GROUPS_DIR / topic_name, ignore_errors=True)

    def producer(
        self,
        topic_name: str,
        fsync: str = "never",
        partitioner: Partitioner | None = None,
        batch_interval: float = 0.01,
        exclusive: bool = False,
    ) -> Producer:
        """A producer for the topic (see ``Producer`` for ``fsync``, ``partitioner``,
        ``batch_interval`` and ``exclusive``)."""
        return Producer(self._open(topic_name), fsync, partitioner, batch_interval, exclusive)

    def consumer(
        self, topic_name: str, start_from: str = "start", group: str | None = None, **options: Any
    ) -> Any:
        """A consumer of the topic, reading from ``start_from`` ("start" or "now").

        Without ``group`` it reads every partition itself. ``options``: ``fetch_bytes``,
        ``on_gap`` ("raise" or "skip": see ``Consumer``).
        With ``group`` it joins that consumer group (see ``twainmq.groups.join_group`` for
        its options: ``on_assign``, ``on_revoke``, ``session_timeout``).
        """
        if group is not None:
            return join_group(self._open(topic_name), group, start_from, **options)
        if start_from not in START_FROM:  # None is the engine's own "nothing yet", not public
            raise InvalidOptionError(f'start_from must be "start" or "now", not {start_from!r}')
        return Consumer(self._open(topic_name), start_from, **options)

    def end_offsets(self, topic_name: str) -> dict[int, int]:
        """Partition -> offset of the next message written there (cheap: reads the heads)."""
        topic = self._open(topic_name)
        try:
            return topic.end_offsets()
        finally:
            topic.close()

    def describe_topic(self, topic_name: str) -> TopicDescription:
        """Partitions, segments, offsets and bytes of a topic (read-only snapshot)."""
        return describe_topic(self._root, read_config(self._root, topic_name))

    def _open(self, topic_name: str) -> OpenTopic:
        return OpenTopic(self._root, read_config(self._root, topic_name), self._registry)

    def __repr__(self) -> str:
        return f"Twain({str(self._root)!r})"


def _message_type(item: object) -> str:
    """A ``message_types`` entry as a type name: a name, or a class (its stored name)."""
    if isinstance(item, str):
        return item
    if isinstance(item, type):
        return message_type_name(item)
    raise TopicConfigError(f"message_types entry {item!r} must be a type name or a class")


def _remove_tree(directory: Path) -> None:
    """Move a directory aside atomically, then delete it."""
    check_topic_name(directory.name)
    tombstone = directory.with_name(f".deleted-{directory.name}-{os.getpid()}-{time.time_ns()}")
    os.rename(directory, tombstone)
    shutil.rmtree(tombstone, ignore_errors=True)


def multi_poll(consumers: Sequence[Any], offset: int | None = None) -> tuple[int, Message] | None:
    """Poll several consumers in turn; return ``(index, message)`` of the first with one.

    Starts after index ``offset`` (pass back the returned index for round-robin fairness;
    None starts at 0). Returns None when no consumer has a message. Never blocks.
    """
    count = len(consumers)
    start = -1 if offset is None else offset
    for step in range(1, count + 1):
        index = (start + step) % count
        message = consumers[index].poll()
        if message is not None:
            return index, message
    return None
