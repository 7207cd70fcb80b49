"""``mq-bridge validate CONFIG`` and ``mq-bridge schema``.

``validate`` checks every route, publisher and consumer of a file: first the schema (with
the meaning the schema encodes: unknown endpoints and middleware, an output-only endpoint
used as an input, ...), then, for entries that pass, it builds their endpoints and
middleware without connecting them, which catches what only the builders know (e.g.
``[retry, dlq]`` in the wrong order). Nothing is connected and no message is sent; a
``deduplication`` middleware with a file store does create its (empty) database.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from mq_bridge.config.documents import read_source, section_entries
from mq_bridge.config.loader import load_endpoint, load_route, validate_document
from mq_bridge.config.schema import config_schema
from mq_bridge.errors import ConfigError
from mq_bridge.runtime.factory import build_input, build_output, new_context

__all__ = ["add_parsers", "print_schema", "validate"]


def add_parsers(subparsers: Any) -> None:
    check = subparsers.add_parser(
        "validate",
        help="check a config file: every problem with its path (exit 0 when valid, 1 if not)",
    )
    check.add_argument("config", help="a YAML or JSON config file")
    check.set_defaults(run=validate)

    schema = subparsers.add_parser(
        "schema", help="print the JSON Schema of config files (for editors)"
    )
    schema.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead")
    schema.set_defaults(run=print_schema)


def validate(args: argparse.Namespace) -> int:
    path = args.config
    problems = validate_document(("file", path))
    if not problems:
        problems = _build_problems(path)
    if problems:
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        print(f"mq-bridge: error: {path}: {count}", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(f"{path}: valid ({_contents(path)})")
    return 0


def print_schema(args: argparse.Namespace) -> int:
    text = json.dumps(config_schema(), indent=2, ensure_ascii=False) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(text)
        print(f"wrote the schema to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _entries(path: str) -> dict[str, dict[str, Any]]:
    """Section -> entry name -> the section's loader (bare documents: one entry)."""
    document = read_source(("file", path))
    if document.kind == "route":
        return {"routes": {"route": None}}
    if document.kind == "endpoint":
        return {"publishers": {"endpoint": None}}
    found: dict[str, dict[str, Any]] = {}
    for section in ("routes", "publishers", "consumers"):
        if document.kind == "sections" and section not in document.content:
            continue
        if document.kind == "route_map" and section != "routes":
            continue
        found[section] = dict.fromkeys(section_entries(document, section))
    return found


def _build_problems(path: str) -> list[str]:
    problems = []
    bare = read_source(("file", path)).kind in ("route", "endpoint")
    for section, names in _entries(path).items():
        for name in names:
            where = section if bare else f"{section}.{name}"
            try:
                _BUILDERS[section](path, None if bare else name)
            except ConfigError as error:
                problems.append(f"{where}.{error}" if error.path else f"{where}: {error}")
    return problems


def _build_route(path: str, name: str | None) -> None:
    config = load_route(("file", path), name)
    context = new_context(config["name"], bool(config.get("allow_fault_injection")))
    try:
        _close(build_input(config["input"], context))
    except ConfigError as error:
        raise ConfigError(str(error), path="input") from None
    try:
        _close(build_output(config["output"], context))
    except ConfigError as error:
        raise ConfigError(str(error), path="output") from None


def _build_publisher(path: str, name: str | None) -> None:
    config = load_endpoint(("file", path), name, "publishers", "output")
    _close(build_output(config, new_context("publisher")))


def _build_consumer(path: str, name: str | None) -> None:
    config = load_endpoint(("file", path), name, "consumers", "input")
    _close(build_input(config, new_context("consumer")))


_BUILDERS: dict[str, Callable[[str, str | None], None]] = {
    "routes": _build_route,
    "publishers": _build_publisher,
    "consumers": _build_consumer,
}


def _close(endpoint: Any) -> None:
    try:
        endpoint.close()
    except Exception:
        pass  # never connected: nothing that matters can fail here


def _contents(path: str) -> str:
    parts = []
    for section, names in _entries(path).items():
        label = section if len(names) != 1 else section[:-1]
        parts.append(f"{len(names)} {label}: {', '.join(names)}")
    return "; ".join(parts)
