"""Options of the `twain` endpoint (see `mq_bridge.endpoints.twain`) and opening its store."""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from mq_bridge.config.declarations import MAX_MILLISECONDS, Options
from mq_bridge.errors import EndpointError
from twainmq import TopicExistsError, Twain, TwainMQError

__all__ = ["KEY_TYPE_PATTERN", "NAME_PATTERN", "TopicSettings", "TwainOptions", "open_store"]

log = logging.getLogger("mq_bridge.endpoints.twain")

#: Topic and group names, as twainmq accepts them.
NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$"
#: Key types as `twainmq.keys.parse_key_type` accepts them: u8..u64, or charN with N from 1
#: to 255 written with at most 3 digits (``char007`` is ``char7``).
KEY_TYPE_PATTERN = (
    "^(u8|u16|u32|u64|char(0{0,2}[1-9]|0?[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5]))$"
)
#: ``patternErrorMessage`` is what editors (and `mq-bridge validate`) say instead of the regex.
KeyType = Annotated[
    str,
    Field(
        pattern=KEY_TYPE_PATTERN,
        json_schema_extra={
            "patternErrorMessage": "must be u8, u16, u32, u64 or charN with N from 1 to 255"
        },
    ),
]


# The bounds are the engine's (`twainmq.config.TopicConfig.__post_init__`), so a config that
# validates creates its topic; tests/mq_bridge/config/test_limits.py checks them against it.
class TopicSettings(Options):
    """Settings of a topic the endpoint creates when it does not exist."""

    partitions: int = Field(1, ge=1, le=1 << 16, description="Partitions of the new topic.")
    key_type: KeyType | None = Field(
        None,
        description="Key type: u8, u16, u32, u64 or charN with N from 1 to 255 (default u16).",
    )
    max_message_bytes: int | None = Field(
        None, ge=1, le=1 << 29, description="Largest message accepted."
    )
    segment_bytes: int | None = Field(
        None, ge=1024, le=1 << 31, description="Segment size before a roll."
    )
    retention_bytes: int | None = Field(
        None, ge=0, le=1 << 62, description="Bytes kept per partition."
    )
    retention_seconds: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="Age of data kept (a finite number)."
    )

    def create_arguments(self) -> dict[str, Any]:
        """The settings given, as keyword arguments of `Twain.create_topic`."""
        return self.model_dump(exclude_unset=True) | {"partitions": self.partitions}


class TwainOptions(Options):
    """A twainmq topic in a store directory: the embedded, durable log."""

    root: str = Field(min_length=1, description="The store's directory.")
    topic: str = Field(pattern=NAME_PATTERN, description="Topic name.")
    group: str | None = Field(
        None, pattern=NAME_PATTERN, description="Input: consumer group (default: the route's name)."
    )
    start_from: Literal["start", "now"] = Field(
        "start", description="Input: where a group with no commit starts."
    )
    session_timeout_ms: int = Field(
        10_000,
        ge=1,
        le=MAX_MILLISECONDS,
        description="Input: a member silent this long is expelled from the group.",
    )
    commit_interval_ms: int = Field(
        0,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Input: commit acks at most this often (0: every ack).",
    )
    create: TopicSettings | None = Field(
        None, description="Create the topic if it does not exist, with these settings."
    )
    key_from: str | None = Field(None, min_length=1, description="Output: key field.")
    exactly_once_output: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        description=(
            "Input: the twain topic of the same store this route writes to; a message whose"
            " output is there already is not handed out again after a crash (exactly-once)."
        ),
    )
    fsync: Literal["never", "batch", "always"] = Field(
        "never",
        description="Output: when the producer forces data to disk; input: when commits are.",
    )

    @cached_property
    def store_root(self) -> Path:
        return Path(self.root).expanduser()

    @property
    def session_timeout(self) -> float:
        return self.session_timeout_ms / 1000

    @property
    def commit_interval(self) -> float:
        return self.commit_interval_ms / 1000

    def describe(self) -> str:
        return f"twain:{self.store_root}/{self.topic}"


def open_store(options: TwainOptions) -> Twain:
    """The store, with the topic created first when `create` asks for it."""
    try:
        store = Twain(options.store_root)
        if options.create is not None and not store.topic_exists(options.topic):
            settings = options.create.create_arguments()
            try:
                store.create_topic(options.topic, **settings)
                log.info("%s: created the topic (%s)", options.describe(), settings)
            except TopicExistsError:
                pass  # another instance created it first: use that one
    except (OSError, TwainMQError) as error:
        raise EndpointError(f"{options.describe()}: cannot open the store: {error}") from error
    if not store.topic_exists(options.topic):
        raise EndpointError(
            f"{options.describe()}: topic {options.topic!r} does not exist; create it"
            f" (twainmq --root {options.store_root} create {options.topic} -p PARTITIONS) or add"
            " `create: {partitions: N}` to the endpoint"
        )
    return store
