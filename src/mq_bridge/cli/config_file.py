"""What the commands take out of a config file: its routes and the endpoint to try out.

``send`` and ``consume`` use a named entry of the ``publishers:`` / ``consumers:`` section,
a bare endpoint file, or a route's endpoint: ``send --route R`` publishes into the input of
route R (to feed it) and ``consume --route R`` reads its output (to see what it produced).
"""

from __future__ import annotations

from typing import Any, Literal

from mq_bridge.config.documents import read_source, section_entries
from mq_bridge.config.loader import load_route
from mq_bridge.errors import ConfigError

__all__ = ["load_routes", "route_endpoint", "route_names"]

#: The name `load_route` gives the route of a bare route file (one with ``input`` on top).
BARE_ROUTE = "route"


def route_names(path: str) -> list[str]:
    """The names of the routes in the file (``["route"]`` for a bare route file)."""
    return _routes(path)[0]


def load_routes(path: str, wanted: list[str] | None) -> list[dict[str, Any]]:
    """Every route of the file (or the `wanted` ones, in that order), validated."""
    names, bare = _routes(path)
    for name in wanted or []:
        _check_route_name(path, name, names)
    return [load_route(("file", path), None if bare else name) for name in wanted or names]


def route_endpoint(path: str, route: str, side: Literal["input", "output"]) -> dict[str, Any]:
    """The `side` endpoint of `route`, without its middlewares (they belong to the route)."""
    names, bare = _routes(path)
    _check_route_name(path, route, names)
    config = load_route(("file", path), None if bare else route)[side]
    return {key: value for key, value in config.items() if key != "middlewares"}


def _routes(path: str) -> tuple[list[str], bool]:
    document = read_source(("file", path))
    if document.kind == "route":
        return [BARE_ROUTE], True
    if document.kind == "endpoint":
        raise ConfigError(f"{path}: has no routes (it is a bare endpoint)")
    if document.kind == "sections" and "routes" not in document.content:
        raise ConfigError(f"{path}: has no routes: section")
    try:
        return list(section_entries(document, "routes")), False
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def _check_route_name(path: str, name: str, names: list[str]) -> None:
    if name not in names:
        raise ConfigError(f"{path}: no route named {name!r}; routes: {', '.join(names)}")
