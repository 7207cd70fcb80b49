"""custom: an endpoint registered from Python, by name (mq-bridge 1.2.0's explicit form).

Features
    - ``{"custom": {"name": "pulsar", "config": {...}}}`` is the same endpoint as
      ``{"pulsar": {...}}``: the factory given to `mq_bridge.register_endpoint("pulsar",
      factory)` makes its object with ``factory(route_name, config)``; see
      `mq_bridge.endpoints.python` for what the object implements.
    - The name is looked up when the endpoint is built (``start()``, ``from_config``), so
      `mq-bridge validate` accepts a config whose code registers the name at run time.

Options
    name     the registered endpoint's name (required)
    config   any value, handed to the factory (default: {})
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import BuildContext, InputEndpoint, OutputEndpoint

__all__ = ["OPTIONS", "CustomOptions", "build_input", "build_output"]


class CustomOptions(Options):
    """An endpoint registered from Python with mq_bridge.register_endpoint, by name."""

    name: str = Field(min_length=1, description="The registered endpoint's name.")
    config: Any = Field(None, description="Handed to the endpoint's factory (default {}).")

    #: `config` goes to the user's own factory, which decides what it takes.
    NUL_ALLOWED: ClassVar[frozenset[str]] = frozenset({"config"})


OPTIONS = CustomOptions


def build_input(options: CustomOptions, context: BuildContext) -> InputEndpoint:
    """The registered endpoint as an input."""
    from mq_bridge.endpoints.python import registry

    return registry.build_input(options.name, options.config, context, "custom.name")


def build_output(options: CustomOptions, context: BuildContext) -> OutputEndpoint:
    """The registered endpoint as an output."""
    from mq_bridge.endpoints.python import registry

    return registry.build_output(options.name, options.config, context, "custom.name")
