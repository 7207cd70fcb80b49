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
      "retention_seconds": null,
      "crc32": "5f3a09c1"          (CRC-32 of every byte above this line)
    }

The file is written once, atomically (``atomic_files``: temp file, fsync, hard link so that two
creators cannot both win, fsync of the directory); the topic exists exactly when its ``.twc``
exists.

**Checksum.** The last setting, ``"crc32"``, is the CRC-32 (8 lowercase hex digits) of the
file's exact bytes before that line, and the file must end with that line and ``}``. So any
changed, cut or appended byte is detected (CRC-32 catches every error burst up to 32 bits), and
a damaged file raises ``TopicConfigCorruptError`` naming it, never changed settings. A file
edited by hand fails the check too: its error says so.

**Compatibility.** ``format_version`` stays 1 (the settings did not change). A file without a
``"crc32"`` line, as written before checksums, is read as before (unchecked); a file that
mentions ``"crc32"`` anywhere but does not end with a well-formed checksum line is damaged.
A twainmq from before checksums refuses a checksummed file (unknown setting ``crc32``).

**Checked on every open** (``read_config``): the ``name`` inside must be the file's topic (a
copied config would otherwise make a topic read another topic's data), and the partition count
and key type must fit the topic's data directory: no partition directory at or beyond
``partitions``, and the first record of each partition's oldest segment (if its record CRC
holds) has a key of the key type's length. Both are refused with
``TopicConfigMismatchError``, which says how to migrate instead.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .atomic_files import write_file_atomically
from .errors import (
    InvalidTopicNameError,
    TopicConfigCorruptError,
    TopicConfigError,
    TopicConfigMismatchError,
    TopicExistsError,
    TwainMQError,
    UnknownTopicError,
)
from .keys import KeyType, parse_key_type

FORMAT_VERSION = 1
CONFIG_SUFFIX = ".twc"
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 16 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024
_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,200}")
CHECKSUM_FIELD = "crc32"
MAX_CONFIG_BYTES = 1 << 20
# The signed part (every byte up to and including the "," ending the previous line), then the
# checksum line, then the closing brace: nothing else may follow.
_SIGNED_RE = re.compile(rb'(\{\n.*,\n)  "crc32": "([0-9a-f]{8})"\n\}\n', re.DOTALL)
# A record's header: length u32, crc32 u32, timestamp_us i64, tag u8, key_length u8 (encoding.py).
_RECORD_HEADER = struct.Struct("<IIqBB")


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
        if retention is not None and (
            type(retention) not in (int, float) or not math.isfinite(retention) or retention < 0
        ):
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


def config_bytes(config: TopicConfig) -> bytes:
    """The bytes of a config file: JSON, one setting a line, ending with its checksum line."""
    body = json.dumps({"format_version": FORMAT_VERSION, **asdict(config)}, indent=2)
    signed = (body[: -len("\n}")] + ",\n").encode()
    return signed + f'  "{CHECKSUM_FIELD}": "{zlib.crc32(signed):08x}"\n}}\n'.encode()


def write_new_config(root: Path, config: TopicConfig) -> None:
    """Create the topic's config file, or raise TopicExistsError if it already exists."""
    path = config_path(root, config.name)
    try:
        write_file_atomically(path, config_bytes(config), exclusive=True)
    except FileExistsError:
        raise TopicExistsError(f"topic {config.name!r} already exists ({path})") from None


def read_config(root: Path, topic: str, *, check_data: bool = True) -> TopicConfig:
    """Read, verify and validate a topic's config file.

    Raises UnknownTopicError if it does not exist, TopicConfigCorruptError if its checksum
    fails, TopicConfigMismatchError if it names another topic or (``check_data``) its partition
    count or key type disagrees with the topic's data, TopicConfigError for any other problem.
    Every message names the file.
    """
    path = config_path(root, topic)
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise UnknownTopicError(f"topic {topic!r} does not exist (no {path})") from None
    except OSError as exc:
        raise TopicConfigError(f"{path}: cannot read topic config: {exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise TopicConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes: not a topic config")
    config = config_from_dict(parse_config_bytes(raw, path), path)
    if config.name != topic:
        raise TopicConfigMismatchError(
            f"{path}: this config is for topic {config.name!r}, but its file name says topic "
            f"{topic!r} (a config copied from another topic?): refusing to open it, since "
            f"topic {topic!r} would read and write the data of topic {config.name!r}. Create "
            f"topic {topic!r} with `twainmq create` instead of copying a .twc file."
        )
    if check_data:
        check_config_against_data(root / config.name, config, path)
    return config


def parse_config_bytes(raw: bytes, path: Path) -> Any:
    """The JSON document of a config file, its checksum verified (if it has one)."""
    signed = _SIGNED_RE.fullmatch(raw)
    if signed is not None:
        stored, computed = int(signed.group(2), 16), zlib.crc32(signed.group(1))
        if stored != computed:
            raise TopicConfigCorruptError(
                f"{path}: topic config checksum mismatch (stored {stored:08x}, computed "
                f"{computed:08x}): the file is damaged, or was edited by hand. Restore it from "
                "a backup. Settings cannot be edited in place: partitions and key_type never "
                f"(migrate instead: {MIGRATION_HINT})"
            )
    elif f'"{CHECKSUM_FIELD}"'.encode() in raw:
        raise TopicConfigCorruptError(
            f"{path}: topic config is damaged: its checksum line is malformed, misplaced or "
            "followed by other bytes (it must be the last setting, then '}' and a newline)"
        )
    try:
        data = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise TopicConfigError(f"{path}: cannot read topic config: {exc}") from None
    if isinstance(data, dict) and CHECKSUM_FIELD in data:
        if signed is None:
            raise TopicConfigCorruptError(f"{path}: topic config is damaged: bad checksum field")
        del data[CHECKSUM_FIELD]
    return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid setting value")


MIGRATION_HINT = (
    "to change a topic's partitions or key_type, create a new topic with the new settings "
    "and copy the messages into it, e.g. `twainmq create NEW -p PARTITIONS -k KEY_TYPE` then "
    "`twainmq consume OLD | twainmq produce NEW` (add --key-separator to keep keys), then "
    "delete the old topic"
)


_KEY_CHECK_PARTITIONS = 4


def check_config_against_data(directory: Path, config: TopicConfig, path: Path) -> None:
    """Refuse a config whose partitions or key type disagree with the topic's data directory.

    Cheap: one directory listing, then the first record of the first few partitions that
    hold data (a changed key type shows in every partition with data; reading all of them
    cost each consumer of a 256-partition topic ~15 ms, a third of joining a big group).
    """
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing written yet
    except OSError as exc:
        raise TopicConfigError(f"{path}: cannot list the topic's data {directory}: {exc}") from None
    found = sorted(
        int(e.name)
        for e in entries
        if e.name.isascii()
        and e.name.isdigit()
        and e.name == str(int(e.name))
        and e.is_dir(follow_symlinks=False)
    )
    if found and found[-1] >= config.partitions:
        raise TopicConfigMismatchError(
            f"{path}: the config says partitions={config.partitions}, but {directory} holds "
            f"partition {found[-1]} ({len(found)} partition directories): the partition count "
            "was changed after data was written, which would send keys to other partitions. "
            f"Put back the original count (at least {found[-1] + 1}), or {MIGRATION_HINT}."
        )
    keys = config.keys
    checked = 0
    for partition in found:
        if checked == _KEY_CHECK_PARTITIONS:
            break
        length = _first_key_length(directory / str(partition), config.max_message_bytes)
        if length is None:
            continue
        checked += 1
        fits = length <= keys.width if keys.is_text else length == keys.width
        if not fits:
            stored = f"{length}-byte keys"
            raise TopicConfigMismatchError(
                f"{path}: the config says key_type={config.key_type}, but partition "
                f"{partition} in {directory} holds {stored}: the key type was changed after "
                f"data was written, and stored keys would be misread. Put back the original "
                f"key type, or {MIGRATION_HINT}."
            )


def _first_key_length(partition_dir: Path, max_message_bytes: int) -> int | None:
    """The key length of the first record of the oldest segment, if that record checks out."""
    try:
        names = sorted(
            n for n in os.listdir(partition_dir) if n.endswith(".log") and n[:-4].isdigit()
        )
    except OSError:
        return None
    for name in names[:2]:  # the oldest may be deleted by retention while we look
        try:
            with open(partition_dir / name, "rb") as file:
                header = file.read(_RECORD_HEADER.size)
                if len(header) < _RECORD_HEADER.size:
                    return None
                length, crc, _, _, key_length = _RECORD_HEADER.unpack(header)
                rest_length = length + 4 - _RECORD_HEADER.size
                if not 0 <= rest_length <= max_message_bytes + 1024 or rest_length < key_length:
                    return None  # damaged: the consumer and recovery report it
                rest = file.read(rest_length)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        if len(rest) < rest_length or zlib.crc32(rest, zlib.crc32(header[8:])) != crc:
            return None
        return key_length
    return None


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
    except TwainMQError as exc:  # a bad name or key type too: always naming the file
        raise TopicConfigError(f"{path}: {exc}") from None
