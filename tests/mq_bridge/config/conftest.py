"""Fake endpoint and middleware modules, registered for one test at a time.

The config layer must work with whatever is registered, so most tests register these
small modules (with known roles, options and defaults) next to the real ones.
"""

from __future__ import annotations

import sys
import types
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from mq_bridge.config.declarations import EndpointRef, Options
from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.middleware.registry import MIDDLEWARE_MODULES


def _module(name: str, doc: str, options: type[BaseModel], *functions: str) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.OPTIONS = options  # type: ignore[attr-defined]
    for function in functions:
        setattr(module, function, lambda options, context: None)
    return module


class SourceOptions(Options):
    queue: str = Field(min_length=1)
    prefetch: int = Field(10, ge=1)
    password: str | None = None
    durable: bool = True
    ratio: float = 0.5


class LabelText(Options):
    text: str


class SinkOptions(Options):
    mode: Literal["append", "replace"] = "append"
    copies: list[EndpointRef] = Field(default_factory=list)
    fallback: EndpointRef | None = None
    label: str | LabelText | None = None


class BothOptions(Options):
    pass


class StampOptions(Options):
    label: str = "x"


class GuardOptions(Options):
    limit: int = Field(3, ge=0)


FAKES = {
    "endpoint": {
        # input-only, with a required option, a bounded one and defaults
        "source": _module(
            "fake_source", "source: a fake input-only endpoint.", SourceOptions, "build_input"
        ),
        # output-only, holding nested endpoints like fanout
        "sink": _module(
            "fake_sink", "sink: a fake output-only endpoint.", SinkOptions, "build_output"
        ),
        "both": _module(
            "fake_both",
            "both: a fake endpoint usable either way.",
            BothOptions,
            "build_input",
            "build_output",
        ),
    },
    "middleware": {
        "stamp": _module(
            "fake_stamp", "stamp: a fake output-only middleware.", StampOptions, "wrap_output"
        ),
        "guard": _module(
            "fake_guard",
            "guard: a fake middleware for both sides.",
            GuardOptions,
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
