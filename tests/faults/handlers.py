"""The fault routes' handler: ``mq-bridge run ... --handler tests.faults.handlers:pass_through``."""

from __future__ import annotations

from mq_bridge import Message


def pass_through(message: Message) -> Message:
    """Forward the message unchanged (a handler stage in the route, as users run it)."""
    return message
