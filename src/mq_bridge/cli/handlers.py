"""``--handler [ROUTE=]TARGET``: Python handlers for the routes of a config file.

Config files describe endpoints, not code, so ``mq-bridge run`` takes handlers on the
command line. TARGET is ``module:attribute`` (imported like ``python -m`` would, with the
current directory on ``sys.path``) or ``path/to/file.py:attribute``. The attribute is

- a callable: the route's raw handler (`Route.with_handler`), or
- a mapping of kind -> callable: kind handlers (`Route.add_handler` for each).

Without ``ROUTE=`` the handler applies to every route that is run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from mq_bridge.errors import ConfigError
from mq_bridge.route import Route

__all__ = ["HandlerSpec", "attach_handlers", "parse_handler_spec"]


@dataclass(frozen=True)
class HandlerSpec:
    """One ``--handler`` option: the route it is for (None: every route) and its target."""

    route: str | None
    target: str

    def resolve(self) -> Callable[..., Any] | Mapping[str, Callable[..., Any]]:
        """Import the target; a callable or a mapping of kind -> callable."""
        location, _, attribute = self.target.rpartition(":")
        if not location or not attribute:
            raise self.error("expected MODULE:FUNCTION or FILE.py:FUNCTION")
        value: Any = _import(location, self)
        for part in attribute.split("."):
            if not hasattr(value, part):
                raise self.error(f"{location} has no attribute {part!r}")
            value = getattr(value, part)
        if callable(value):
            return value
        if isinstance(value, Mapping) and value and all(map(callable, value.values())):
            return value
        raise self.error(f"{attribute} is not a function (its type is {type(value).__name__})")

    def error(self, problem: str) -> ConfigError:
        """A one-line error about this option."""
        return ConfigError(f"--handler {self.target}: {problem}")


def parse_handler_spec(text: str) -> HandlerSpec:
    """``ROUTE=TARGET`` or ``TARGET`` (argparse ``type=``)."""
    route, equals, target = text.partition("=")
    if not equals:
        return HandlerSpec(None, text)
    return HandlerSpec(route or None, target)


def attach_handlers(routes: Mapping[str, Route], specs: list[HandlerSpec]) -> set[str]:
    """Give each route the handlers meant for it; a spec naming no known route is an error.
    Returns the names of the routes that got a handler."""
    handled: set[str] = set()
    for spec in specs:
        if spec.route is not None and spec.route not in routes:
            known = ", ".join(routes)
            raise ConfigError(f"--handler {spec.route}=...: no route {spec.route!r} runs ({known})")
        handler = spec.resolve()
        for name, route in routes.items():
            if spec.route in (None, name):
                _attach(route, handler)
                handled.add(name)
    return handled


def _attach(route: Route, handler: Callable[..., Any] | Mapping[str, Callable[..., Any]]) -> None:
    if isinstance(handler, Mapping):
        for kind, function in handler.items():
            route.add_handler(str(kind), function)
    else:
        route.with_handler(handler)


def _import(location: str, spec: HandlerSpec) -> ModuleType:
    if location.endswith(".py") or os.sep in location or "/" in location:
        return _import_file(Path(location), spec)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does, so local modules import
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as error:
        raise spec.error(f"no module named {error.name!r}") from None
    except Exception as error:
        raise spec.error(f"importing {location} failed: {type(error).__name__}: {error}") from None


def _import_file(path: Path, spec: HandlerSpec) -> ModuleType:
    if not path.is_file():
        raise spec.error(f"no such file: {path}")
    name = f"mq_bridge_handlers_{path.stem}"
    if str(path.parent.absolute()) not in sys.path:
        sys.path.insert(0, str(path.parent.absolute()))  # as `python FILE` does, for siblings
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise spec.error(f"cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    try:
        module_spec.loader.exec_module(module)
    except Exception as error:
        raise spec.error(f"importing {path} failed: {type(error).__name__}: {error}") from None
    return module
