"""Options of the `file` endpoint."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from mq_bridge.config.declarations import MAX_MILLISECONDS, OptionError, Options
from mq_bridge.endpoints.file.codec import format_name

__all__ = ["FileOptions", "parse_delimiter"]

#: The names in `codec.FORMATS` (a test checks that they agree).
FormatName = Literal[
    "envelope", "envelope_json", "envelope_text", "json", "normal", "payload", "raw", "text"
]


class FileOptions(Options):
    """Messages as delimited records in a local file."""

    path: str = Field(min_length=1, description="The file.")
    format: FormatName = Field(
        "normal", description="Record format: normal | json | text | raw (or a peer alias)."
    )
    delimiter: str | None = Field(
        None,
        min_length=1,
        description='Record delimiter: text, or hex such as "0x00". Default "\\n".',
    )
    mode: Literal["consume", "subscribe", "group_subscribe"] = Field(
        "consume", description="Input: read from the start, tail from the end, or as a group."
    )
    delete: bool = Field(
        False, description="Input (consume, subscribe): remove acknowledged records."
    )
    group_id: str | None = Field(
        None,
        pattern="^[A-Za-z0-9._-]+$",
        description="Input (group_subscribe): names the progress file <path>.<group_id>.offset.",
    )
    read_from_tail: bool = Field(
        False, description="Input (group_subscribe): with no stored progress, start at the end."
    )
    fsync: Literal["off", "batch", "periodic", "always"] = Field(
        "off", description="Output: when written data is forced to disk."
    )
    fsync_interval_ms: int = Field(
        1000, ge=0, le=MAX_MILLISECONDS, description="Output: the period of `periodic`."
    )
    linger_ms: int = Field(
        0,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Output: opt-in write-behind: how long single sends may wait in a buffer "
        "before they are written (0: each is written before send returns).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> FileOptions:
        if self.mode == "group_subscribe" and not self.group_id:
            raise OptionError("group_id", "mode group_subscribe needs a `group_id`")
        if self.delete and self.mode == "group_subscribe":
            raise OptionError("delete", "works with consume and subscribe, not group_subscribe")
        try:
            parse_delimiter(self.delimiter)
        except ValueError as error:
            raise OptionError("delimiter", str(error)) from None
        return self

    @cached_property
    def file_path(self) -> Path:
        return Path(self.path).expanduser()

    @cached_property
    def record_format(self) -> str:
        """The canonical format name (a peer alias such as ``envelope`` resolved)."""
        return format_name(self.format)

    @cached_property
    def delimiter_bytes(self) -> bytes:
        return parse_delimiter(self.delimiter)

    @property
    def fsync_interval(self) -> float:
        return self.fsync_interval_ms / 1000

    @property
    def linger(self) -> float:
        return self.linger_ms / 1000


def parse_delimiter(value: str | None) -> bytes:
    """The delimiter bytes: None means newline; ``0x..`` is hex; anything else is UTF-8 text."""
    if value is None:
        return b"\n"
    if value[:2].lower() == "0x" and len(value) > 2:
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            raise ValueError(f"bad hex delimiter {value!r}") from None
    if not value:
        raise ValueError("the delimiter must not be empty")
    return value.encode()
