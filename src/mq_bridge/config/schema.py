"""The JSON Schema of a config document, assembled from the registered modules.

Each endpoint and middleware module declares its options as ``OPTIONS`` (a pydantic
model, see `mq_bridge.config.declarations`), the route settings are `RouteOptions`, and
`config_schema()` puts their schemas together (JSON Schema draft 2020-12). `types.py` is
generated from it (``scripts/gen_config_types.py``), and validation runs against it.

Names in ``$defs``::

    ConfigSections   {"routes": {name: Route}, "publishers": {...}, "consumers": {...}}
    Route            input, output and the route options below
    Endpoint         exactly one endpoint key plus optional "middlewares"
    InputEndpoint    an Endpoint that is read from (validated as an input)
    Middleware       exactly one middleware key, e.g. {"retry": {...}}
    <Name>Config     an endpoint's options, e.g. MemoryConfig (or its model's ``title``)
    <Name>Middleware a middleware's options, e.g. RetryMiddleware (or its model's ``title``)

A declaration may refer to a nested endpoint (fanout, switch, dlq) with
``{"$ref": "#/$defs/Endpoint"}``; nested endpoints are validated as outputs.
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from mq_bridge.config.declarations import schema_fragment
from mq_bridge.config.documents import SECTIONS
from mq_bridge.config.route_options import RouteOptions
from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.middleware.registry import MIDDLEWARE_MODULES

__all__ = [
    "SECTIONS",
    "Catalog",
    "Plugin",
    "catalog",
    "config_schema",
    "declared_secret_keys",
    "endpoints",
    "middlewares",
    "registry_key",
    "route_options_schema",
]


def route_options_schema() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each route setting besides input/output, from `RouteOptions`."""
    properties: dict[str, dict[str, Any]] = schema_fragment(RouteOptions)["properties"]
    return properties


@dataclass(frozen=True)
class Plugin:
    """A registered endpoint or middleware module, as the config layer sees it."""

    kind: str  # "endpoint" or "middleware"
    name: str
    module: ModuleType
    def_name: str
    can_input: bool
    can_output: bool

    @property
    def options(self) -> type[BaseModel]:
        """The module's option declaration (``OPTIONS``)."""
        options: type[BaseModel] = self.module.OPTIONS
        return options

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the module's options."""
        return schema_fragment(self.options)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _load(registry: dict[str, str], kind: str, roles: tuple[str, str]) -> dict[str, Plugin]:
    suffix = "Config" if kind == "endpoint" else "Middleware"
    plugins = {}
    for name, module_path in sorted(registry.items()):
        try:
            module = importlib.import_module(module_path)
        except ImportError as error:
            # A driver must be imported inside build functions; an import failure here is
            # a bug in the module, so name it rather than let a bare ImportError escape.
            raise ImportError(
                f"{kind} '{name}' ({module_path}) failed to import: {error}"
            ) from error
        if not hasattr(module, "OPTIONS"):
            raise ImportError(f"{kind} '{name}' ({module_path}) declares no OPTIONS")
        title = module.OPTIONS.model_config.get("title")
        plugins[name] = Plugin(
            kind=kind,
            name=name,
            module=module,
            def_name=title or _camel(name) + suffix,
            can_input=hasattr(module, roles[0]),
            can_output=hasattr(module, roles[1]),
        )
    return plugins


def endpoints() -> dict[str, Plugin]:
    """Every registered endpoint by config name (imports the modules, not their drivers)."""
    return _load(ENDPOINT_MODULES, "endpoint", ("build_input", "build_output"))


def middlewares() -> dict[str, Plugin]:
    """Every registered middleware by config name."""
    return _load(MIDDLEWARE_MODULES, "middleware", ("wrap_input", "wrap_output"))


def registry_key() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """A hashable snapshot of both registries: caches are rebuilt when it changes."""
    return tuple(sorted(ENDPOINT_MODULES.items())), tuple(sorted(MIDDLEWARE_MODULES.items()))


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a config document, as a fresh dict.

    The root accepts a ``routes:``/``publishers:``/``consumers:`` document, a bare route
    or a bare endpoint. Dump it to a file to validate YAML in an editor.
    """
    return copy.deepcopy(_cached_schema(registry_key()))


def declared_secret_keys() -> frozenset[str]:
    """Option names declared with `secret_field` anywhere in the registered declarations."""
    return _cached_secret_keys(registry_key())


@lru_cache(maxsize=8)
def _cached_secret_keys(key: object) -> frozenset[str]:
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                if isinstance(sub, dict) and sub.get("writeOnly"):
                    names.add(name)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(_cached_schema(key)["$defs"])
    return frozenset(names)


@dataclass(frozen=True)
class Catalog:
    """What is registered right now: endpoints and middleware by config name."""

    endpoints: dict[str, Plugin]
    middlewares: dict[str, Plugin]


def catalog() -> Catalog:
    """The registered endpoints and middleware (cached until a registry changes)."""
    return _cached_catalog(registry_key())


@lru_cache(maxsize=8)
def _cached_catalog(_key: object) -> Catalog:
    return Catalog(endpoints(), middlewares())


@lru_cache(maxsize=8)
def _cached_schema(key: object) -> dict[str, Any]:
    plugins = _cached_catalog(key)
    return _assemble(plugins.endpoints, plugins.middlewares)


def _assemble(endpoint_plugins: dict[str, Plugin], middleware_plugins: dict[str, Plugin]) -> dict:
    defs: dict[str, Any] = {
        "ConfigSections": _sections_schema(),
        "RouteMap": {
            "description": "Routes by name, the whole document (mq-bridge's root shape).",
            **_named("Route"),
        },
        "Route": _route_schema(),
        "Endpoint": _endpoint_schema(endpoint_plugins),
        "InputEndpoint": {
            "description": "An endpoint read from (a nested input such as `reader`'s).",
            "$ref": "#/$defs/Endpoint",
        },
        "Middleware": _middleware_schema(middleware_plugins),
    }
    for plugin in [*endpoint_plugins.values(), *middleware_plugins.values()]:
        if plugin.def_name in defs:
            raise ValueError(
                f"{plugin.kind} '{plugin.name}' would define $defs/{plugin.def_name} twice; "
                "give its OPTIONS model a distinct 'title'"
            )
        defs[plugin.def_name] = _plugin_def(plugin)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ConfigDocument",
        "description": "An mq_bridge config: named sections, a bare route, a bare endpoint "
        "or a map of route names to routes.",
        "type": "object",  # every shape is one (both peers' root says so too)
        "anyOf": [
            {"$ref": "#/$defs/ConfigSections"},
            {"$ref": "#/$defs/Route"},
            {"$ref": "#/$defs/Endpoint"},
            {"$ref": "#/$defs/RouteMap"},
        ],
        "$defs": defs,
    }


def _plugin_def(plugin: Plugin) -> dict[str, Any]:
    schema = plugin.schema
    doc = (plugin.module.__doc__ or "").strip().splitlines()
    if doc and "description" not in schema:
        schema["description"] = doc[0]
    return schema


def _named(ref: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": {"$ref": f"#/$defs/{ref}"}}


def _sections_schema() -> dict[str, Any]:
    return {
        "description": "Named routes, publishers and consumers, picked by name when loading.",
        "type": "object",
        "properties": {
            "routes": {"description": "Routes by name.", **_named("Route")},
            "publishers": {"description": "Publisher endpoints by name.", **_named("Endpoint")},
            "consumers": {"description": "Consumer endpoints by name.", **_named("Endpoint")},
        },
        "additionalProperties": False,
    }


def _route_schema() -> dict[str, Any]:
    return {
        "description": "Moves messages from an input endpoint, through a handler, to an output.",
        "type": "object",
        "properties": {
            "input": {"description": "Where messages come from.", "$ref": "#/$defs/Endpoint"},
            "output": {
                "description": "Where handled messages go. Defaults to the null endpoint.",
                "$ref": "#/$defs/Endpoint",
                "default": {"null": {}},
            },
            **route_options_schema(),
        },
        "required": ["input"],
        "additionalProperties": False,
    }


def _endpoint_schema(plugins: dict[str, Plugin]) -> dict[str, Any]:
    properties: dict[str, Any] = {
        name: {"$ref": f"#/$defs/{plugin.def_name}"} for name, plugin in plugins.items()
    }
    properties["middlewares"] = {
        "description": "Middleware around this endpoint, outermost first.",
        "type": "array",
        "items": {"$ref": "#/$defs/Middleware"},
        "default": [],
    }
    schema: dict[str, Any] = {
        "description": "A source or sink of messages: exactly one endpoint key, "
        "plus optional middlewares.",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if plugins:
        schema["oneOf"] = [{"required": [name]} for name in plugins]
    return schema


def _middleware_schema(plugins: dict[str, Plugin]) -> dict[str, Any]:
    return {
        "description": "One middleware: exactly one middleware key with its options.",
        "type": "object",
        "properties": {name: {"$ref": f"#/$defs/{p.def_name}"} for name, p in plugins.items()},
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": 1,
    }
