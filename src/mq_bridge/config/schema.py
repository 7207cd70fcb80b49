"""The JSON Schema of a config document, assembled from the registered modules.

This is the single source of truth for config shapes: the route options are declared
here, each endpoint and middleware module declares its own options as ``SCHEMA``, and
`config_schema()` puts them together (JSON Schema draft 2020-12). `types.py` is
generated from it (``scripts/gen_config_types.py``), and validation runs against it.

Names in ``$defs``::

    ConfigSections   {"routes": {name: Route}, "publishers": {...}, "consumers": {...}}
    Route            input, output and the route options below
    Endpoint         exactly one endpoint key plus optional "middlewares"
    Middleware       exactly one middleware key, e.g. {"retry": {...}}
    <Name>Config     an endpoint's options, e.g. MemoryConfig (or the SCHEMA's "title")
    <Name>Middleware a middleware's options, e.g. RetryMiddleware (or its "title")

A module's SCHEMA may refer to a nested endpoint (fanout, switch, dlq) with
``{"$ref": "#/$defs/Endpoint"}``; nested endpoints are validated as outputs.
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Any

from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.middleware.registry import MIDDLEWARE_MODULES

__all__ = [
    "ROUTE_OPTIONS",
    "SECTIONS",
    "Catalog",
    "Plugin",
    "catalog",
    "config_schema",
    "endpoints",
    "middlewares",
    "registry_key",
]

#: Top-level sections of a document with named entries.
SECTIONS = ("routes", "publishers", "consumers")

#: Route options besides input/output. batch_size 512: a batch is taken as soon as one
#: message is there, so a large cap costs no latency and amortises per-batch work.
ROUTE_OPTIONS: dict[str, dict[str, Any]] = {
    "batch_size": {
        "description": "Most messages handled per batch. The route waits for one message, "
        "then takes whatever else is ready up to this many, so a large value costs no "
        "latency at low load and amortises per-batch work at high load. Defaults to 512.",
        "type": "integer",
        "minimum": 1,
        "default": 512,
    },
    "concurrency": {
        "description": "Batches handled in parallel; commits stay in source order. Defaults to 1.",
        "type": "integer",
        "minimum": 1,
        "default": 1,
    },
    "commit_concurrency_limit": {
        "description": "Most batch commits queued or running at once; at the limit the route "
        "stops reading until one finishes. Defaults to 4096.",
        "type": "integer",
        "minimum": 1,
        "default": 4096,
    },
    "startup_timeout_ms": {
        "description": "How long start() waits for the endpoints to connect. Defaults to 5000.",
        "type": "integer",
        "minimum": 0,
        "default": 5000,
    },
    "reconnect_interval_ms": {
        "description": "Wait before reconnecting after a transient failure. Defaults to 5000.",
        "type": "integer",
        "minimum": 0,
        "default": 5000,
    },
    "empty_batch_delay_ms": {
        "description": "Pause after an empty receive, against hot polling. Defaults to 10.",
        "type": "integer",
        "minimum": 0,
        "default": 10,
    },
    "allow_fault_injection": {
        "description": "Allow fault-injection middleware such as random_panic. Defaults to false.",
        "type": "boolean",
        "default": False,
    },
    "description": {
        "description": "What the route is for, for people reading the config.",
        "type": "string",
        "default": "",
    },
}


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
    def schema(self) -> dict[str, Any]:
        """The module's ``SCHEMA`` (any object, when a module declares none)."""
        return dict(getattr(self.module, "SCHEMA", {"type": "object"}))


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
        title = getattr(module, "SCHEMA", {}).get("title")
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
        "Route": _route_schema(),
        "Endpoint": _endpoint_schema(endpoint_plugins),
        "Middleware": _middleware_schema(middleware_plugins),
    }
    for plugin in [*endpoint_plugins.values(), *middleware_plugins.values()]:
        if plugin.def_name in defs:
            raise ValueError(
                f"{plugin.kind} '{plugin.name}' would define $defs/{plugin.def_name} twice; "
                "give its SCHEMA a distinct 'title'"
            )
        defs[plugin.def_name] = _plugin_def(plugin)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ConfigDocument",
        "description": "An mq_bridge config: named sections, a bare route or a bare endpoint.",
        "anyOf": [
            {"$ref": "#/$defs/ConfigSections"},
            {"$ref": "#/$defs/Route"},
            {"$ref": "#/$defs/Endpoint"},
        ],
        "$defs": defs,
    }


def _plugin_def(plugin: Plugin) -> dict[str, Any]:
    schema = copy.deepcopy(plugin.schema)
    schema.pop("title", None)
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
            **copy.deepcopy(ROUTE_OPTIONS),
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
