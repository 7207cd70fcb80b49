"""Options of the `twain` endpoint (see `mq_bridge.endpoints.twain`) and opening its store."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mq_bridge.errors import ConfigError, EndpointError
from twainmq import TopicExistsError, Twain, TwainMQError

__all__ = ["NAME_PATTERN", "TwainOptions", "open_store"]

log = logging.getLogger("mq_bridge.endpoints.twain")

#: Topic and group names, as twainmq accepts them.
NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$"
_CREATE_SETTINGS = (
    "partitions",
    "key_type",
    "max_message_bytes",
    "segment_bytes",
    "retention_bytes",
    "retention_seconds",
)


@dataclass(frozen=True)
class TwainOptions:
    """The validated options of one `twain` endpoint."""

    root: Path
    topic: str
    group: str | None = None
    start_from: str = "start"
    session_timeout: float = 10.0
    commit_interval: float = 0.0
    create: Mapping[str, Any] | None = None
    key_from: str | None = None
    fsync: str = "never"

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> TwainOptions:
        """Options from a config block; `ConfigError` names the bad field."""
        root, topic = options.get("root"), options.get("topic")
        if not isinstance(root, str) or not root:
            raise ConfigError("needs a `root` (the store's directory)", path="twain.root")
        _check_name(topic, "twain.topic")
        group = options.get("group")
        if group is not None:
            _check_name(group, "twain.group")
        timeout_ms = options.get("session_timeout_ms")
        interval_ms = options.get("commit_interval_ms") or 0
        return cls(
            root=Path(root).expanduser(),
            topic=str(topic),
            group=group,
            start_from=_choice(options, "start_from", ("start", "now")),
            session_timeout=10.0 if timeout_ms is None else timeout_ms / 1000,
            commit_interval=interval_ms / 1000,
            create=_create_settings(options.get("create")),
            key_from=options.get("key_from"),
            fsync=_choice(options, "fsync", ("never", "batch", "always")),
        )

    def describe(self) -> str:
        return f"twain:{self.root}/{self.topic}"


def _check_name(value: object, path: str) -> None:
    if not isinstance(value, str) or not re.fullmatch(NAME_PATTERN, value):
        raise ConfigError(
            f"{value!r} is not a valid name: 1-200 of A-Z a-z 0-9 . _ -, not starting with"
            " '.' or '-'",
            path=path,
        )


def _choice(options: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = options.get(key) or allowed[0]
    if value not in allowed:
        raise ConfigError(f"must be one of {', '.join(allowed)}, got {value!r}", f"twain.{key}")
    return str(value)


def _create_settings(value: object) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError("must be a mapping of topic settings", path="twain.create")
    unknown = sorted(set(value) - set(_CREATE_SETTINGS))
    if unknown:
        raise ConfigError(f"unknown topic settings {unknown}", path="twain.create")
    return dict(value)


def open_store(options: TwainOptions) -> Twain:
    """The store, with the topic created first when `create` asks for it."""
    try:
        store = Twain(options.root)
        if options.create is not None and not store.topic_exists(options.topic):
            try:
                store.create_topic(options.topic, **options.create)
                log.info("%s: created the topic (%s)", options.describe(), options.create)
            except TopicExistsError:
                pass  # another instance created it first: use that one
    except (OSError, TwainMQError) as error:
        raise EndpointError(f"{options.describe()}: cannot open the store: {error}") from error
    if not store.topic_exists(options.topic):
        raise EndpointError(
            f"{options.describe()}: topic {options.topic!r} does not exist; create it"
            f" (twainmq --root {options.root} create {options.topic} -p PARTITIONS) or add"
            " `create: {partitions: N}` to the endpoint"
        )
    return store
