"""Fill in defaults from the schema and tidy values before validation.

Walking the (validation) schema alongside the config, this:

- fills every missing option that has a ``default`` (a route's ``batch_size``, an
  endpoint's options from its declaration, middleware options, nested endpoints);
- turns an empty endpoint or middleware body (``null:`` in YAML, ``{"null": None}``)
  into ``{}``, so ``output: {null: }`` means "the null endpoint with its defaults";
- converts a value that was exactly one ``${VAR}`` placeholder to the integer, number
  or boolean its option expects (environment values are always strings).

It never rejects anything: validation runs afterwards and reports what is wrong. Values
of the wrong shape are left as they are. ``anyOf``/``oneOf`` branches are not entered,
except an optional endpoint (``anyOf: [Endpoint, null]``).
"""

from __future__ import annotations

import copy
from collections.abc import Set
from typing import Any

from mq_bridge.config.schema import catalog

__all__ = ["prepare"]

Path = tuple[Any, ...]

_BOOLEANS = {"true": True, "yes": True, "on": True, "1": True}
_BOOLEANS |= {"false": False, "no": False, "off": False, "0": False}


def prepare(instance: Any, schema: dict[str, Any], defs: dict[str, Any], env: Set[Path]) -> Any:
    """`instance` with defaults filled in and expanded placeholders converted (mutates it)."""
    return _Walker(defs, env).fill(instance, schema, ())


class _Walker:
    def __init__(self, defs: dict[str, Any], expanded_paths: Set[Path]) -> None:
        self.defs = defs
        self.expanded_paths = expanded_paths

    def resolve(self, schema: Any) -> dict[str, Any]:
        while isinstance(schema, dict) and "$ref" in schema:
            schema = self.defs[schema["$ref"].rsplit("/", 1)[-1]]
        return schema if isinstance(schema, dict) else {}

    def fill(self, instance: Any, schema: Any, path: Path) -> Any:
        schema = self.resolve(schema)
        if "x-endpoint" in schema or self.is_optional_endpoint(schema, instance):
            return self.fill_endpoint(instance, path)
        if isinstance(instance, str) and path in self.expanded_paths:
            return _convert(instance, schema.get("type"))
        if isinstance(instance, dict):
            self.fill_mapping(instance, schema, path)
        elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
            for index, item in enumerate(instance):
                instance[index] = self.fill(item, schema["items"], (*path, index))
        return instance

    def is_optional_endpoint(self, schema: dict[str, Any], instance: Any) -> bool:
        """``anyOf: [Endpoint, null]`` holding a mapping (switch's ``default``)."""
        branches = schema.get("anyOf", schema.get("oneOf", []))
        endpoint = any("x-endpoint" in self.resolve(branch) for branch in branches)
        return endpoint and isinstance(instance, dict)

    def fill_mapping(self, instance: dict[str, Any], schema: dict[str, Any], path: Path) -> None:
        properties = schema.get("properties", {})
        for key, sub in properties.items():
            if key in instance:
                instance[key] = self.fill(instance[key], sub, (*path, key))
            elif isinstance(sub, dict) and sub.get("default") is not None:  # null = absent
                instance[key] = self.fill(copy.deepcopy(sub["default"]), sub, (*path, key))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in instance.keys() - properties.keys():
                instance[key] = self.fill(instance[key], extra, (*path, key))

    def fill_endpoint(self, instance: Any, path: Path) -> Any:
        if not isinstance(instance, dict):
            return instance
        plugins = catalog()
        for name, plugin in plugins.endpoints.items():
            if name in instance:
                instance[name] = self.fill_plugin(instance[name], plugin.def_name, (*path, name))
        middlewares = instance.setdefault("middlewares", [])
        for index, item in enumerate(middlewares if isinstance(middlewares, list) else []):
            if isinstance(item, dict) and len(item) == 1:
                [(name, options)] = item.items()
                if name in plugins.middlewares:
                    def_name = plugins.middlewares[name].def_name
                    where = (*path, "middlewares", index, name)
                    item[name] = self.fill_plugin(options, def_name, where)
        return instance

    def fill_plugin(self, options: Any, def_name: str, path: Path) -> Any:
        schema = self.defs.get(def_name, {})
        if options is None and "object" in _types(schema):
            options = {}  # ``retry:`` with no value: the options with their defaults
        return self.fill(options, schema, path)


def _types(schema: dict[str, Any]) -> list[Any]:
    kind = schema.get("type", [])
    return kind if isinstance(kind, list) else [kind]


def _convert(text: str, expected: Any) -> Any:
    kinds = expected if isinstance(expected, list) else [expected]
    if "string" in kinds:
        return text
    stripped = text.strip()
    if "integer" in kinds and stripped.lstrip("+-").isdigit():
        return int(stripped)
    if "number" in kinds:
        try:
            return float(stripped)
        except ValueError:
            return text
    if "boolean" in kinds and stripped.lower() in _BOOLEANS:
        return _BOOLEANS[stripped.lower()]
    return text
