"""Topic configuration: the human-readable, versioned ``<root>/<topic>.twc`` file.

Example (JSON, one setting a line)::

    {
      "format_version": 1,
      "name": "events",
      "key_type": "u16",
      "partitions": 4,
      "message_types": [],
      "segment_bytes": 67108864,
      "index_interval_bytes": 16384,
      "max_message_bytes": 1048576,
      "retention_bytes": null,
      "retention_seconds": null
    }

The file is written once, atomically (``atomic_files``: temp file, fsync, hard link so that two
creators cannot both win, fsync of the directory); the topic exists exactly when its ``.twc``
exists.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .atomic_files import write_file_atomically
from .errors import InvalidTopicNameError, TopicConfigError, TopicExistsError, UnknownTopicError
from .keys import KeyType, parse_key_type

FORMAT_VERSION = 1
CONFIG_SUFFIX = ".twc"
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 16 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024
_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,200}")


def check_topic_name(name: object) -> str:
    """Return ``name`` if it is a safe topic name, else raise InvalidTopicNameError."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name.startswith("."):
        raise InvalidTopicNameError(
            f"topic name {name!r} is not valid: use 1-200 characters from A-Z a-z 0-9 . _ -, "
            "not starting with ."
        )
    return name


@dataclass(frozen=True)
class TopicConfig:
    """Settings of one topic, as stored in its ``.twc`` file."""

    name: str
    key_type: str = "u16"
    partitions: int = 1
    message_types: list[str] = field(default_factory=list)
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    retention_bytes: int | None = None
    retention_seconds: float | None = None

    def __post_init__(self) -> None:
        check_topic_name(self.name)
        parse_key_type(self.key_type)
        _check_int("partitions", self.partitions, 1, 1 << 16)
        _check_int("segment_bytes", self.segment_bytes, 1024, 1 << 31)
        _check_int("index_interval_bytes", self.index_interval_bytes, 64, 1 << 30)
        _check_int("max_message_bytes", self.max_message_bytes, 1, 1 << 29)
        if self.retention_bytes is not None:
            _check_int("retention_bytes", self.retention_bytes, 0, 1 << 62)
        retention = self.retention_seconds
        if retention is not None and (not isinstance(retention, (int, float)) or retention < 0):
            raise TopicConfigError(f"retention_seconds {retention!r} must be a number >= 0")
        types = self.message_types
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise TopicConfigError(f"message_types {types!r} must be a list of type names")

    @property
    def keys(self) -> KeyType:
        """The parsed key type."""
        return parse_key_type(self.key_type)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise TopicConfigError(f"{name} {value!r} must be an integer from {low} to {high}")


def config_path(root: Path, topic: str) -> Path:
    """Return the path of a topic's config file."""
    return root / f"{check_topic_name(topic)}{CONFIG_SUFFIX}"


def write_new_config(root: Path, config: TopicConfig) -> None:
    """Create the topic's config file, or raise TopicExistsError if it already exists."""
    path = config_path(root, config.name)
    text = json.dumps({"format_version": FORMAT_VERSION, **asdict(config)}, indent=2) + "\n"
    try:
        write_file_atomically(path, text.encode(), exclusive=True)
    except FileExistsError:
        raise TopicExistsError(f"topic {config.name!r} already exists ({path})") from None


def read_config(root: Path, topic: str) -> TopicConfig:
    """Read and validate a topic's config file."""
    path = config_path(root, topic)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UnknownTopicError(f"topic {topic!r} does not exist (no {path})") from None
    except (OSError, ValueError) as exc:
        raise TopicConfigError(f"{path}: cannot read topic config: {exc}") from None
    return config_from_dict(data, path)


def config_from_dict(data: Any, path: Path) -> TopicConfig:
    """Build a TopicConfig from parsed JSON, naming the file in every error."""
    if not isinstance(data, dict):
        raise TopicConfigError(f"{path}: expected a JSON object, found {type(data).__name__}")
    version = data.pop("format_version", None)
    if version != FORMAT_VERSION:
        raise TopicConfigError(
            f"{path}: format_version {version!r} is not supported (this twainmq reads "
            f"{FORMAT_VERSION})"
        )
    try:
        return TopicConfig(**data)
    except TypeError as exc:
        raise TopicConfigError(f"{path}: {exc}") from None
    except TopicConfigError as exc:
        raise TopicConfigError(f"{path}: {exc}") from None
