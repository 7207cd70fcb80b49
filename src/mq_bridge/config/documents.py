"""Read a config document from a file, a string or a mapping, and pick one entry of it.

A document is one of:

- a bare route: a mapping with ``input`` (and usually ``output``);
- a bare endpoint: a mapping with one endpoint key, e.g. ``{"memory": {...}}``;
- sections: ``routes:``, ``publishers:`` and/or ``consumers:``, each mapping names to
  routes or endpoints;
- a mapping of route names to routes (how mq-bridge 1.2.0 writes a file of routes).

Files and strings may be YAML or JSON; which one is decided by the content, not the
file name. YAML's ``null:`` key (which parses as None) is read as the string ``"null"``,
so ``output: {null: {}}`` means the null endpoint in YAML as in JSON.

Every source is held to the limits of `bounds` (nesting depth, values with YAML aliases
expanded, file size) before anything walks it, so a hostile or runaway document is refused
with a `ConfigError` naming the problem (and the file) instead of exhausting memory or
raising `RecursionError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mq_bridge.config.bounds import (
    MAX_FILE_BYTES,
    LimitExceeded,
    check_json_depth,
    check_tree,
    load_yaml,
)
from mq_bridge.config.problems import did_you_mean
from mq_bridge.errors import ConfigError

#: Top-level sections of a document with named entries.
SECTIONS = ("routes", "publishers", "consumers")

__all__ = ["Document", "Source", "pick", "read_source", "section_entries"]

Source = tuple[Literal["file", "str", "config"], Any]


@dataclass
class Document:
    """A parsed document and where it came from (a file name, or "" for other sources)."""

    content: dict[str, Any]
    origin: str = ""

    @property
    def kind(self) -> Literal["route", "sections", "route_map", "endpoint"]:
        """Which of the document shapes (see the module docstring) this one is."""
        content = self.content
        if "input" in content:
            return "route"
        if any(key in SECTIONS for key in content):
            return "sections"
        looks_like_routes = all(isinstance(v, dict) and "input" in v for v in content.values())
        if content and looks_like_routes and not _near_section_name(content):
            return "route_map"
        return "endpoint"


def read_source(source: Source) -> Document:
    """Parse `source` into a `Document` (a deep copy made of plain dicts and lists)."""
    kind, value = source
    if kind == "file":
        return Document(_as_mapping(_parse(_read_file(value), str(value)), str(value)), str(value))
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"a config string must be str, got {type(value).__name__}")
        return Document(_as_mapping(_parse(value, ""), ""))
    if kind == "config":
        return Document(_as_mapping(value, ""))
    raise ConfigError(f"unknown config source kind {kind!r}; expected 'file', 'str' or 'config'")


def pick(document: Document, section: str, name: str | None) -> tuple[Any, tuple[str, ...]]:
    """The entry `name` of `section` and its path, e.g. ``(entry, ("routes", "orders"))``.

    With no name, a section holding exactly one entry yields that entry.
    """
    entries = section_entries(document, section)
    prefix: tuple[str, ...] = (section,) if document.kind == "sections" else ()
    if name is None:
        if len(entries) == 1:
            [(only, entry)] = entries.items()
            return entry, (*prefix, only)
        raise ConfigError(
            f"the document has {len(entries)} {section} ({_names(entries)}); "
            "pass a name to pick one"
        )
    if name not in entries:
        raise ConfigError(
            f"no {section[:-1]} named {name!r}{did_you_mean(name, entries)}; "
            f"available {section}: {_names(entries)}"
        )
    return entries[name], (*prefix, name)


def section_entries(document: Document, section: str) -> dict[str, Any]:
    """The named entries of `section` (``routes``, ``publishers`` or ``consumers``)."""
    content = document.content
    if document.kind == "route_map" and section == "routes":
        return content
    if document.kind != "sections":
        raise ConfigError(f"the document has no {section}: section")
    unknown = [key for key in content if key not in SECTIONS]
    if unknown:
        key = unknown[0]
        hint = did_you_mean(key, SECTIONS) or f"; expected {', '.join(SECTIONS)}"
        raise ConfigError(f"unknown section{hint}", path=key)
    if section not in content:
        present = ", ".join(key + ":" for key in content)
        raise ConfigError(f"the document has no {section}: section (it has {present})")
    entries = content[section] if content[section] is not None else {}
    if not isinstance(entries, dict):
        raise ConfigError(f"must map names to {section}, got {entries!r}", path=section)
    return entries


def _names(entries: Mapping[str, Any]) -> str:
    return ", ".join(sorted(map(str, entries))) or "(none)"


def _near_section_name(content: Mapping[str, Any]) -> bool:
    return any(did_you_mean(str(key), SECTIONS) for key in content)


def _read_file(path: Any) -> str:
    try:
        with Path(path).open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ConfigError(
                f"{path}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB (the limit for a"
                " config file)"
            )
        return data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"config path is a directory, not a file: {path}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None


def _parse(text: str, origin: str) -> Any:
    where = f"{origin}: " if origin else ""
    try:
        if text.lstrip().startswith(("{", "[")):
            check_json_depth(text)
            try:
                return json.loads(text)
            except json.JSONDecodeError as json_error:
                if _yaml_or_none(text) is None:
                    raise ConfigError(
                        f"{where}invalid JSON at line {json_error.lineno}, "
                        f"column {json_error.colno}: {json_error.msg}"
                    ) from None
        return load_yaml(text)
    except LimitExceeded as error:
        raise ConfigError(f"{where}config refused{error.where()}: {error}") from None
    except _yaml().YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{where}invalid YAML{at}: {problem}") from None


def _yaml_or_none(text: str) -> Any:
    try:
        return load_yaml(text)
    except _yaml().YAMLError:
        return None


def _as_mapping(content: Any, origin: str) -> dict[str, Any]:
    where = f"{origin}: " if origin else ""
    if content is None or (isinstance(content, Mapping) and not content):
        raise ConfigError(f"{where}the config is empty")
    if not isinstance(content, Mapping):
        raise ConfigError(f"{where}a config must be a mapping, got {type(content).__name__}")
    try:
        check_tree(content)  # before anything recursive walks it
    except ConfigError as error:
        raise ConfigError(f"{where}{error}") from None
    plain: dict[str, Any] = _plain(content)
    return plain


def _plain(value: Any) -> Any:
    """A deep copy made of dicts with string keys, lists and scalars."""
    if isinstance(value, Mapping):
        return {_key(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _key(key: Any) -> str:
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _yaml() -> Any:
    """PyYAML, imported when a document is first parsed (keeps `import mq_bridge` cheap)."""
    import yaml

    return yaml
