"""Validate a route or an endpoint against the assembled schema, reporting every problem.

The public schema describes an endpoint with ``oneOf`` (one branch per endpoint), which
is right for editors but gives unreadable errors. For validation we swap every endpoint
for a custom keyword, ``x-endpoint: <role>``, that checks the endpoint key first (unknown
name -> did-you-mean, output-only endpoint used as an input -> says so), then validates
only that endpoint's options and its ``middlewares`` list the same way. Options that pass
the schema are then parsed by their declaration (`Plugin.options`), whose own validators
check what a schema cannot (one option requiring another), so "valid" means it builds.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, Literal

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from pydantic import ValidationError as PydanticValidationError

from mq_bridge.config.declarations import declaration_problems
from mq_bridge.config.problems import CUSTOM, did_you_mean, show_value
from mq_bridge.config.schema import Catalog, Plugin, catalog, config_schema, registry_key

__all__ = [
    "Role",
    "Target",
    "validation_defs",
    "validation_errors",
]

Role = Literal["input", "output"]
Target = Literal["route", "input", "output"]


def validation_errors(instance: Any, target: Target) -> list[ValidationError]:
    """Every schema violation of `instance` as a route, an input or an output endpoint."""
    return list(_validator(registry_key(), target).iter_errors(instance))


def validation_defs() -> dict[str, Any]:
    """The ``$defs`` used for validation (endpoints replaced by ``x-endpoint``)."""
    return _cached_defs(registry_key())


@lru_cache(maxsize=8)
def _cached_defs(_key: object) -> dict[str, Any]:
    defs = copy.deepcopy(config_schema()["$defs"])
    defs["Endpoint"] = {"x-endpoint": "output"}
    defs["InputEndpoint"] = {"x-endpoint": "input"}
    route = defs["Route"]["properties"]
    route["input"] = {"$ref": "#/$defs/InputEndpoint"}
    route["output"] = {"$ref": "#/$defs/Endpoint", "default": route["output"]["default"]}
    return defs


@lru_cache(maxsize=32)
def _validator(key: object, target: Target) -> Validator:
    root: dict[str, Any] = {"$defs": _cached_defs(key)}
    if target == "route":
        root["$ref"] = "#/$defs/Route"
    else:
        root["x-endpoint"] = target
    cls = validators.extend(Draft202012Validator, {"x-endpoint": _check_endpoint})
    return cls(root)


def _error(message: str, *path: str | int) -> ValidationError:
    return ValidationError(message, validator=CUSTOM, path=path)


def _check_endpoint(
    validator: Validator, role: Role, instance: Any, _schema: Any
) -> Iterator[ValidationError]:
    plugins = catalog()
    if not isinstance(instance, dict):
        yield _error(
            f"must be an endpoint such as {{memory: {{...}}}}, got {show_value(instance, [])}"
        )
        return
    names = [key for key in instance if key != "middlewares"]
    known = [name for name in names if name in plugins.endpoints]
    if not names:
        yield _error(f"no endpoint given; expected one of: {_listing(plugins.endpoints)}")
    for name in names:
        if name not in plugins.endpoints:
            yield _error(_unknown("endpoint", name, plugins.endpoints), name)
    if len(known) > 1:
        yield _error(f"more than one endpoint given ({', '.join(known)}); use exactly one")
    for name in known:
        yield from _check_plugin(validator, plugins.endpoints[name], role, instance[name], name)
    if "middlewares" in instance:
        yield from _check_middlewares(validator, plugins, role, instance["middlewares"])


def _check_middlewares(
    validator: Validator, plugins: Catalog, role: Role, items: Any
) -> Iterator[ValidationError]:
    if not isinstance(items, list):
        yield _error(
            f"must be a list such as [{{retry: {{...}}}}], got {show_value(items, [])}",
            "middlewares",
        )
        return
    for index, item in enumerate(items):
        where = ("middlewares", index)
        if not isinstance(item, dict) or len(item) != 1:
            yield _error("each middleware is a mapping with one key, e.g. {retry: {...}}", *where)
            continue
        [(name, options)] = item.items()
        if name not in plugins.middlewares:
            yield _error(_unknown("middleware", name, plugins.middlewares), *where, name)
            continue
        for error in _check_plugin(validator, plugins.middlewares[name], role, options, name):
            error.path.extendleft(reversed(where))
            yield error


def _check_plugin(
    validator: Validator, plugin: Plugin, role: Role, options: Any, name: str
) -> Iterator[ValidationError]:
    if not (plugin.can_input if role == "input" else plugin.can_output):
        other = "output" if role == "input" else "input"
        message = f"the {name} {plugin.kind} cannot be used as an {role} (it is {other}-only)"
        yield _error(message, name)
        return
    reference = {"$ref": f"#/$defs/{plugin.def_name}"}
    schema_errors = list(validator.descend(options, reference, path=name))  # type: ignore[attr-defined]
    yield from schema_errors
    if not schema_errors:  # the checks a schema cannot say (the declaration's validators)
        yield from _declaration_errors(plugin, options, name)


def _declaration_errors(plugin: Plugin, options: Any, name: str) -> Iterator[ValidationError]:
    try:
        plugin.options.model_validate({} if options is None else options)
    except PydanticValidationError as error:
        for location, message in declaration_problems(error):
            yield _error(message, name, *location)


def _unknown(kind: str, name: str, registered: dict[str, Plugin]) -> str:
    hint = did_you_mean(name, registered)
    if hint:
        return f"unknown {kind}{hint}"
    return f"unknown {kind}; expected one of: {_listing(registered)}"


def _listing(registered: dict[str, Plugin]) -> str:
    return ", ".join(sorted(registered)) or "(none registered)"
