"""Load one route or endpoint from a config source: picked, env-expanded, defaulted, validated.

This is what `Route`, `Publisher` and `Consumer` call::

    load_route(("file", "bridge.yaml"), "orders")
    load_endpoint(("config", {"memory": {"topic": "t"}}), None, "publishers", "output")

Every problem in the picked entry is reported at once in one `ConfigError` (its
``problems`` attribute lists them). Other entries of the document are not validated, so
a broken route does not stop a good one from loading; `validate_document` checks all.

Publishers and consumers are strict about sections: a publisher named ``orders`` is
looked up under ``publishers:`` only, never taken from a route of that name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from mq_bridge.config.documents import Document, Source, pick, read_source, section_entries
from mq_bridge.config.env import expand_env
from mq_bridge.config.problems import format_path
from mq_bridge.errors import ConfigError

if TYPE_CHECKING:
    from mq_bridge.config.validation import Role, Target

__all__ = ["Source", "load_endpoint", "load_route", "validate_document"]

Section = Literal["publishers", "consumers"]


def load_route(source: Source, name: str | None = None) -> dict[str, Any]:
    """The route `name` (or the bare route) of `source`, with every default filled in.

    The result has ``input``, ``output`` (``{"null": {}}`` when absent), every route
    option and ``name`` (the given name, the picked entry's name, or ``"route"``).
    """
    document = read_source(source)
    if document.kind == "endpoint":
        raise _error(document, ["this is an endpoint, not a route: a route needs 'input'"])
    entry: Any = document.content
    prefix: tuple[str, ...] = ()
    if document.kind != "route":
        entry, prefix = _pick(document, "routes", name)
    route: dict[str, Any] = _validated(entry, "route", prefix, document)
    route["name"] = name or (prefix[-1] if prefix else "route")
    return route


def load_endpoint(source: Source, name: str | None, section: Section, role: Role) -> dict[str, Any]:
    """The endpoint `name` of `section` (or the bare endpoint) of `source`, as an `role`.

    The result is ``{"<endpoint>": {options with defaults}, "middlewares": [...]}``.
    """
    document = read_source(source)
    if document.kind in ("route", "route_map"):
        hint = f"a {section[:-1]} needs an endpoint such as {{memory: {{topic: ...}}}}"
        raise _error(document, [f"this is a route, not an endpoint; {hint}"])
    entry: Any = document.content
    prefix: tuple[str, ...] = ()
    if document.kind != "endpoint":
        entry, prefix = _pick(document, section, name)
    endpoint: dict[str, Any] = _validated(entry, role, prefix, document)
    return endpoint


def validate_document(source: Source) -> list[str]:
    """Every problem of every route, publisher and consumer in `source` ([] when valid)."""
    document = read_source(source)
    kind = document.kind
    if kind in ("route", "endpoint"):
        return _problems(document.content, "route" if kind == "route" else "output", ())[1]
    problems: list[str] = []
    checks: list[tuple[Literal["routes", "publishers", "consumers"], Target]] = [
        ("routes", "route"),
        ("publishers", "output"),
        ("consumers", "input"),
    ]
    for section, target in checks:
        if kind == "route_map" and section != "routes":
            continue
        if kind == "sections" and section not in document.content:
            continue
        try:
            entries = section_entries(document, section)
        except ConfigError as error:
            return error.problems
        for entry_name, entry in entries.items():
            prefix = (section, entry_name) if kind == "sections" else (entry_name,)
            problems += _problems(entry, target, prefix)[1]
    return problems


def _pick(document: Document, section: str, name: str | None) -> tuple[Any, tuple[str, ...]]:
    try:
        return pick(document, section, name)
    except ConfigError as error:
        message = str(error)
        routes = document.content.get("routes")
        if section != "routes" and isinstance(routes, dict) and name in routes:
            message += (
                f" (a route named {name!r} exists under routes:, but a {section[:-1]}"
                f" is an endpoint entry under {section}:)"
            )
        raise _error(document, [message]) from None


def _validated(entry: Any, target: Target, prefix: tuple[str, ...], document: Document) -> Any:
    value, problems = _problems(entry, target, prefix)
    if problems:
        raise _error(document, problems)
    return value


def _problems(entry: Any, target: Target, prefix: tuple[str, ...]) -> tuple[Any, list[str]]:
    # The schema machinery (jsonschema, pydantic, every declaration) loads with the first
    # document, not with `import mq_bridge`.
    from mq_bridge.config.defaults import prepare
    from mq_bridge.config.problems import problems_from
    from mq_bridge.config.validation import validation_defs, validation_errors

    expansion = expand_env(entry, prefix)
    schema = {"$ref": "#/$defs/Route"} if target == "route" else {"x-endpoint": target}
    value = prepare(expansion.value, schema, validation_defs(), expansion.expanded_paths)
    unset = {line.split(": ", 1)[0] for line in expansion.problems}
    found = [
        line
        for line in problems_from(validation_errors(value, target), prefix)
        if line.split(": ", 1)[0] not in unset
    ]
    if target == "route" and isinstance(value, dict):
        found += _fault_injection_problems(value, prefix)
    return value, expansion.problems + found


def _fault_injection_problems(route: dict[str, Any], prefix: tuple[str, ...]) -> list[str]:
    if route.get("allow_fault_injection") is True:
        return []
    problems = []
    for side in ("input", "output"):
        endpoint = route.get(side)
        middlewares = endpoint.get("middlewares") if isinstance(endpoint, dict) else None
        for index, item in enumerate(middlewares if isinstance(middlewares, list) else []):
            if isinstance(item, dict) and "random_panic" in item:
                path = format_path((*prefix, side, "middlewares", index, "random_panic"))
                problems.append(f"{path}: needs 'allow_fault_injection: true' on the route")
    return problems


def _error(document: Document, problems: list[str]) -> ConfigError:
    where = f"{document.origin}: " if document.origin else ""
    if len(problems) == 1:
        message = where + problems[0]
    else:
        message = f"{where}{len(problems)} problems:\n  " + "\n  ".join(problems)
    error = ConfigError(message, problems=problems)
    first = problems[0].split(": ", 1)
    error.path = first[0] if len(first) == 2 and " " not in first[0] else ""
    return error
