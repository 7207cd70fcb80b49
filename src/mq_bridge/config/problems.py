"""Turn jsonschema's validation errors into short lines a person can act on.

Every problem reads ``dotted.path: what is wrong``, e.g.
``routes.orders.input.memory.capacity: must be >= 1, got 0``; list items show as
``middlewares[0]``. Values of secret options are never shown.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.config.redaction import is_secret_key, redact_text

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

__all__ = ["CUSTOM", "did_you_mean", "format_path", "problems_from", "show_value"]

#: `validator` name of errors whose message is already readable (see validation.py).
CUSTOM = "x-mqb"

_TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}
_COMPARISONS = {
    "minimum": ">=",
    "maximum": "<=",
    "exclusiveMinimum": ">",
    "exclusiveMaximum": "<",
}


def format_path(parts: Iterable[Any]) -> str:
    """``("routes", "a", "middlewares", 0, "retry")`` -> ``routes.a.middlewares[0].retry``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'capacity'?"`` for a near miss, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def problems_from(errors: Iterable[ValidationError], prefix: Sequence[Any] = ()) -> list[str]:
    """One readable line per problem (deduplicated, in a stable order)."""
    lines: dict[str, None] = {}
    for error in errors:
        for parts, message in _describe(error):
            path = format_path([*prefix, *parts])
            lines[f"{path}: {message}" if path else message] = None
    return sorted(lines)


def _describe(error: ValidationError) -> list[tuple[list[Any], str]]:
    path = list(error.absolute_path)
    kind, expected, instance = error.validator, _expected(error), _instance(error)
    if kind == "additionalProperties":
        return [([*path, key], _unknown_option(key, error)) for key in _extra_keys(error)]
    if kind == "required":
        missing = [name for name in expected if name not in instance]
        return [([*path, name], "required option is missing") for name in missing]
    if kind in ("anyOf", "oneOf") and (branch := _plausible_branch(error)):
        return [found for sub in branch for found in _describe(sub)]
    return [(path, _message(error, path))]


def _plausible_branch(error: ValidationError) -> list[ValidationError]:
    """The errors of the one alternative whose type fits the value, if only one does.

    ``anyOf: [Endpoint, null]`` given a bad endpoint, or ``oneOf: [string, object]``
    given a mapping with a typo, then reads like the plain case.
    """
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context or []:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    fitting = [
        errors
        for errors in branches.values()
        if not any(e.validator == "type" and len(e.relative_path) == 0 for e in errors)
    ]
    return fitting[0] if len(fitting) == 1 and len(branches) > 1 else []


def _message(error: ValidationError, path: list[Any]) -> str:
    kind, expected, got = error.validator, _expected(error), show_value(error.instance, path)
    if kind == CUSTOM:
        return error.message
    if kind == "type":
        return f"must be {_expected_types(expected)}, got {got}"
    if kind in _COMPARISONS:
        return f"must be {_COMPARISONS[str(kind)]} {expected}, got {got}"
    if kind == "enum":
        instance = _instance(error)
        hint = did_you_mean(instance, map(str, expected)) if isinstance(instance, str) else ""
        return f"must be one of {', '.join(map(repr, expected))}, got {got}{hint}"
    if kind in ("anyOf", "oneOf"):
        return _alternatives(error, path)
    return _other(error, got)


def _other(error: ValidationError, got: str) -> str:
    kind, expected = error.validator, _expected(error)
    if kind == "const":
        return f"must be {expected!r}, got {got}"
    if kind == "minLength":
        return "must not be empty" if expected == 1 else f"needs at least {expected} characters"
    if kind == "maxLength":
        return f"must be at most {expected} characters long"
    if kind == "pattern":
        said = _schema(error).get("patternErrorMessage")  # as editors show it
        return f"{said}, got {got}" if said else f"must match the pattern {expected!r}, got {got}"
    if kind == "minItems":
        return f"needs at least {expected} item(s)"
    if kind == "maxItems":
        return f"takes at most {expected} item(s)"
    if kind == "minProperties":
        return f"needs at least {expected} entr{'y' if expected == 1 else 'ies'}"
    if kind == "maxProperties":
        return f"takes at most {expected} entr{'y' if expected == 1 else 'ies'}"
    return redact_text(error.message)


def _alternatives(error: ValidationError, path: list[Any]) -> str:
    branches, instance = _expected(error), _instance(error)
    if all(set(branch) == {"required"} for branch in branches):
        names = [name for branch in branches for name in branch["required"]]
        if error.validator == "oneOf" and all(n in instance for n in names):
            return f"give only one of {', '.join(map(repr, names))}"
        return f"needs one of {', '.join(map(repr, names))}"
    if all(sub.validator == "type" for sub in error.context or []):
        types = [t for sub in error.context or [] for t in _as_list(_expected(sub))]
        return f"must be {_expected_types(types)}, got {show_value(error.instance, path)}"
    inner = min(error.context or [], key=lambda sub: -len(sub.absolute_path), default=None)
    if inner is None:
        return "does not match any of the allowed forms"
    detail = _describe(inner)[0]
    where = format_path(detail[0][len(path) :])
    return f"does not match any allowed form; closest: {where + ': ' if where else ''}{detail[1]}"


def _unknown_option(key: str, error: ValidationError) -> str:
    allowed = list(_schema(error).get("properties", {}))
    hint = did_you_mean(key, allowed)
    if hint or not allowed:
        return f"unknown option{hint}"
    return f"unknown option; expected one of: {', '.join(sorted(allowed))}"


def _extra_keys(error: ValidationError) -> list[str]:
    known = _schema(error).get("properties", {})
    patterns = _schema(error).get("patternProperties", {})
    return [
        key
        for key in _instance(error)
        if key not in known and not any(re.search(p, key) for p in patterns)
    ]


def _expected_types(expected: Any) -> str:
    names = [_TYPE_NAMES.get(name, name) for name in dict.fromkeys(_as_list(expected))]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _expected(error: ValidationError) -> Any:
    return error.validator_value


def _instance(error: ValidationError) -> Any:
    return error.instance


def _schema(error: ValidationError) -> Any:
    return error.schema


def show_value(value: Any, path: list[Any]) -> str:
    """A short repr of a bad value, hidden when it sits under a secret key."""
    if any(is_secret_key(part) for part in path):
        return "<hidden>"
    text = redact_text(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."
