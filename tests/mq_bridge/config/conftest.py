"""Fake endpoint and middleware modules, registered for one test at a time.

The config layer must work with whatever is registered, so most tests register these
small modules (with known roles, options and defaults) next to the real ones.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.middleware.registry import MIDDLEWARE_MODULES


def _module(name: str, doc: str, schema: dict[str, Any], *functions: str) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.SCHEMA = schema  # type: ignore[attr-defined]
    for function in functions:
        setattr(module, function, lambda options, context: None)
    return module


FAKES = {
    "endpoint": {
        # input-only, with a required option, a bounded one and defaults
        "source": _module(
            "fake_source",
            "source: a fake input-only endpoint.",
            {
                "type": "object",
                "properties": {
                    "queue": {"type": "string", "minLength": 1},
                    "prefetch": {"type": "integer", "minimum": 1, "default": 10},
                    "password": {"type": "string"},
                    "durable": {"type": "boolean", "default": True},
                    "ratio": {"type": "number", "default": 0.5},
                },
                "required": ["queue"],
                "additionalProperties": False,
            },
            "build_input",
        ),
        # output-only, holding nested endpoints like fanout
        "sink": _module(
            "fake_sink",
            "sink: a fake output-only endpoint.",
            {
                "type": "object",
                "properties": {
                    "mode": {"enum": ["append", "replace"], "default": "append"},
                    "copies": {"type": "array", "items": {"$ref": "#/$defs/Endpoint"}},
                    "fallback": {"anyOf": [{"$ref": "#/$defs/Endpoint"}, {"type": "null"}]},
                    "label": {
                        "oneOf": [
                            {"type": "string"},
                            {
                                "type": "object",
                                "properties": {"text": {"type": "string"}},
                                "required": ["text"],
                                "additionalProperties": False,
                            },
                        ]
                    },
                },
                "additionalProperties": False,
            },
            "build_output",
        ),
        "both": _module(
            "fake_both",
            "both: a fake endpoint usable either way.",
            {"type": ["object", "null"], "additionalProperties": False},
            "build_input",
            "build_output",
        ),
    },
    "middleware": {
        "stamp": _module(
            "fake_stamp",
            "stamp: a fake output-only middleware.",
            {
                "type": "object",
                "properties": {"label": {"type": "string", "default": "x"}},
                "additionalProperties": False,
            },
            "wrap_output",
        ),
        "guard": _module(
            "fake_guard",
            "guard: a fake middleware for both sides.",
            {
                "type": "object",
                "properties": {"limit": {"type": "integer", "minimum": 0, "default": 3}},
                "additionalProperties": False,
            },
            "wrap_input",
            "wrap_output",
        ),
    },
}


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the fake modules (removed again after the test)."""
    for kind, registry in (("endpoint", ENDPOINT_MODULES), ("middleware", MIDDLEWARE_MODULES)):
        for name, module in FAKES[kind].items():
            monkeypatch.setitem(sys.modules, module.__name__, module)
            monkeypatch.setitem(registry, name, module.__name__)
