"""Options of the `memory` endpoint."""

from __future__ import annotations

from pydantic import Field, model_validator

from mq_bridge.config.declarations import MAX_MILLISECONDS, OptionError, Options

__all__ = ["MemoryOptions"]


class MemoryOptions(Options):
    """An in-process topic (queue readers compete; subscribers each get every message)."""

    topic: str | None = Field(None, min_length=1, description="Topic name or memory:// URL.")
    url: str | None = Field(None, min_length=1, description="Alias for `topic`.")
    capacity: int | None = Field(
        None,
        ge=0,
        description="Max queued messages per channel; 0 = unbounded. The first user creates "
        "the topic (default 100); a later, larger capacity grows it.",
    )
    request_reply: bool = Field(False, description="Output: wait for a reply to each message.")
    request_timeout_ms: int = Field(
        30_000, ge=0, le=MAX_MILLISECONDS, description="Output: how long to wait for a reply."
    )
    subscribe_mode: bool = Field(
        False, description="Input: a broadcast subscriber instead of a queue reader."
    )
    enable_nack: bool = Field(
        False,
        description="Input: a message whose handler failed (without a NonRetryableError) "
        "is redelivered with backoff; without it, dropped and counted (a stopping route's "
        "nack requeues either way).",
    )
    send_timeout_ms: int = Field(
        10_000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Output: the longest wait for room in a full topic.",
    )

    @model_validator(mode="after")
    def _names_a_topic(self) -> MemoryOptions:
        name = self.topic or self.url
        if not name:
            raise ValueError("needs a `topic` (or `url`)")
        if "://" in name and not name.startswith("memory://"):
            raise OptionError(
                "url" if self.url else "topic", f"only memory:// topics are supported, got {name!r}"
            )
        return self

    @property
    def topic_name(self) -> str:
        """The topic named by `topic` or `url`, without a ``memory://`` prefix."""
        return str(self.topic or self.url).removeprefix("memory://")
