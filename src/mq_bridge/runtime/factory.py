"""Builds endpoints from validated config: resolves names in the registries, applies middleware.

An endpoint config is ``{<endpoint name>: <options>, "middlewares": [{<name>: <options>}, ...]}``.
The middleware list applies in order, outermost first (see docs/design.md, "Middleware
order"): ``[metrics, retry, dlq]`` wraps as ``metrics(retry(dlq(endpoint)))``.

A route's handler sits between an output endpoint and its middleware
(``metrics(retry(dlq(HandlerStage(endpoint))))``), so `around_endpoint` lets the runtime
insert it there.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from mq_bridge.endpoints.base import BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.kit.source_metadata import source_metadata_enabled
from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.errors import ConfigError
from mq_bridge.middleware.registry import MIDDLEWARE_MODULES

__all__ = ["build_input", "build_output", "new_context"]

OutputWrapper = Callable[[OutputEndpoint], OutputEndpoint]


def new_context(
    route_name: str,
    allow_fault_injection: bool = False,
    stopping: threading.Event | None = None,
) -> BuildContext:
    """A build context whose `build_output`/`build_input` build nested endpoints (fanout,
    switch, dlq, reader)."""
    context = BuildContext(
        route_name=route_name,
        allow_fault_injection=allow_fault_injection,
        stopping=stopping,
        source_metadata=source_metadata_enabled(),
    )
    context.build_output = lambda config: build_output(config, context)
    context.build_input = lambda config: build_input(config, context)
    return context


def build_input(config: Mapping[str, Any], context: BuildContext) -> InputEndpoint:
    """The input endpoint `config` describes, wrapped in its middleware."""
    endpoint: InputEndpoint = _build_endpoint(config, context, "input")
    return _wrap_in_middleware(endpoint, config, context, "input")


def build_output(
    config: Mapping[str, Any],
    context: BuildContext,
    around_endpoint: OutputWrapper | None = None,
) -> OutputEndpoint:
    """The output endpoint `config` describes (wrapped by `around_endpoint`), in its middleware."""
    endpoint: OutputEndpoint = _build_endpoint(config, context, "output")
    if around_endpoint is not None:
        endpoint = around_endpoint(endpoint)
    return _wrap_in_middleware(endpoint, config, context, "output")


_OTHER_SIDE = {"input": "outputs", "output": "inputs"}


def _build_endpoint(config: Mapping[str, Any], context: BuildContext, side: str) -> Any:
    from mq_bridge.config.declarations import parse_options  # pydantic: on first build

    name, options = _endpoint_entry(config)
    module = _import(ENDPOINT_MODULES, name, "endpoint")
    factory = getattr(module, f"build_{side}", None)
    if factory is None:
        raise ConfigError(f"the {name!r} endpoint cannot be used as an {side}", path=name)
    return factory(parse_options(module.OPTIONS, options, name), context)


def _wrap_in_middleware(
    endpoint: Any, config: Mapping[str, Any], context: BuildContext, side: str
) -> Any:
    """Wrap innermost-last, so the first middleware in the list is the outermost."""
    from mq_bridge.config.declarations import parse_options

    for mw_name, mw_options in reversed(_middleware_entries(config)):
        module = _import(MIDDLEWARE_MODULES, mw_name, "middleware")
        wrap = getattr(module, f"wrap_{side}", None)
        if wrap is None:
            raise ConfigError(
                f"{mw_name!r} middleware only applies to {_OTHER_SIDE[side]}", "middlewares"
            )
        endpoint = wrap(endpoint, parse_options(module.OPTIONS, mw_options, mw_name), context)
    return endpoint


def _endpoint_entry(config: Mapping[str, Any]) -> tuple[str, Any]:
    if not isinstance(config, Mapping):
        raise ConfigError(f"an endpoint must be a mapping, got {type(config).__name__}")
    names = [key for key in config if key != "middlewares"]
    if len(names) != 1:
        found = ", ".join(map(repr, names)) or "none"
        raise ConfigError(f"an endpoint needs exactly one endpoint type, found {found}")
    return names[0], config[names[0]]


def _middleware_entries(config: Mapping[str, Any]) -> list[tuple[str, Any]]:
    entries = []
    for position, item in enumerate(config.get("middlewares") or []):
        if not isinstance(item, Mapping) or len(item) != 1:
            raise ConfigError("each middleware is a one-key mapping", f"middlewares.{position}")
        ((name, options),) = item.items()
        entries.append((name, options))
    return entries


def _import(registry: Mapping[str, str], name: str, kind: str) -> ModuleType:
    path = registry.get(name)
    if path is None:
        close = difflib.get_close_matches(name, list(registry), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown {kind} {name!r}{hint}", path=name)
    return importlib.import_module(path)
