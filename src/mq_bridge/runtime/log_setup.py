"""`init_logging`: the bridge logs through the standard `logging` module, under ``mq_bridge``."""

from __future__ import annotations

import logging
import os

__all__ = ["init_logging"]

_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "off": logging.CRITICAL + 1,
}
_initialized = False

logging.getLogger("mq_bridge").addHandler(logging.NullHandler())


def init_logging(level: str | None = None) -> None:
    """Let the bridge's events at `level` (default ``"warn"``) reach `logging`'s handlers.

    ``MQ_BRIDGE_LOG`` overrides `level`. Configure output as usual (``logging.basicConfig``).
    Raises `RuntimeError` when called twice.
    """
    global _initialized
    if _initialized:
        raise RuntimeError("mq_bridge logging is already initialized")
    chosen = (os.environ.get("MQ_BRIDGE_LOG") or level or "warn").strip().lower()
    if chosen not in _LEVELS:
        raise ValueError(f"unknown log level {chosen!r}; use one of {', '.join(_LEVELS)}")
    logging.getLogger("mq_bridge").setLevel(_LEVELS[chosen])
    _initialized = True
