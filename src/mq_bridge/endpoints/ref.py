"""ref: an endpoint registered from Python, by name alone (``{"ref": "pulsar"}``).

Features
    - Resolves the endpoint given to `mq_bridge.register_endpoint(name, factory)`; the
      factory is called as ``factory(route_name, {})``. Use ``custom`` to hand it a config.
    - The name is looked up when the endpoint is built, as for ``custom``.

Options
    the registered endpoint's name (a string)
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, RootModel

from mq_bridge.endpoints.base import BuildContext, InputEndpoint, OutputEndpoint

__all__ = ["OPTIONS", "RefOptions", "build_input", "build_output"]


class RefOptions(RootModel[Annotated[str, Field(min_length=1)]]):
    """The name of an endpoint registered from Python with mq_bridge.register_endpoint."""


OPTIONS = RefOptions


def build_input(options: RefOptions, context: BuildContext) -> InputEndpoint:
    """The referenced endpoint as an input."""
    from mq_bridge.endpoints.python import registry

    return registry.build_input(options.root, None, context, "ref")


def build_output(options: RefOptions, context: BuildContext) -> OutputEndpoint:
    """The referenced endpoint as an output."""
    from mq_bridge.endpoints.python import registry

    return registry.build_output(options.root, None, context, "ref")
