"""The public surface: `__all__` is exactly what we document, and each name works."""

from __future__ import annotations

import logging

import pytest

import mq_bridge
from mq_bridge.runtime import log_setup as _logging

PUBLIC = {
    "AsyncConsumer",
    "AsyncPublisher",
    "AsyncRoute",
    "Consumer",
    "MemoryDrainer",
    "Message",
    "NonRetryableError",
    "Publisher",
    "RetryableError",
    "Route",
    "__version__",
    "config_schema",
    "init_logging",
    "metrics_snapshot",
    "register_endpoint",
    "register_middleware",
    "unregister_endpoint",
    "unregister_middleware",
}


def test_all_lists_exactly_the_public_names_and_each_resolves():
    assert set(mq_bridge.__all__) == PUBLIC
    assert len(mq_bridge.__all__) == len(PUBLIC)
    for name in PUBLIC:
        assert getattr(mq_bridge, name) is not None
    namespace: dict = {}
    exec("from mq_bridge import *", namespace)
    assert PUBLIC - {"__version__"} <= set(namespace)


def test_public_classes_and_functions_have_docstrings():
    for name in PUBLIC - {"__version__"}:
        assert getattr(mq_bridge, name).__doc__, name


def test_handler_errors_carry_their_retriable_flag():
    assert mq_bridge.RetryableError.retriable is True
    assert mq_bridge.NonRetryableError.retriable is False


def test_init_logging_routes_events_into_logging_once(monkeypatch, caplog):
    monkeypatch.setattr(_logging, "_initialized", False)
    monkeypatch.delenv("MQ_BRIDGE_LOG", raising=False)
    bridge_logger = logging.getLogger("mq_bridge")
    monkeypatch.setattr(bridge_logger, "level", bridge_logger.level)
    mq_bridge.init_logging("debug")
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("mq_bridge.route").debug("hello from the bridge")
    assert "hello from the bridge" in caplog.text
    with pytest.raises(RuntimeError, match="already initialized"):
        mq_bridge.init_logging()


def test_init_logging_rejects_an_unknown_level(monkeypatch):
    monkeypatch.setattr(_logging, "_initialized", False)
    monkeypatch.delenv("MQ_BRIDGE_LOG", raising=False)
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        mq_bridge.init_logging("loud")
