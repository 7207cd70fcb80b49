"""Expand ``${VAR}`` and ``${VAR:-default}`` in a config's string values.

Only values are expanded, never keys. ``$${`` stands for a literal ``${``. An unset
variable without a default is a problem naming the option and the variable. A value
that is exactly one placeholder may be converted afterwards to the number or boolean
its option expects (see `defaults.prepare`), so ``capacity: ${CAPACITY:-100}`` works.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mq_bridge.config.problems import format_path

__all__ = ["Expansion", "expand_env"]

_PLACEHOLDER = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

Path = tuple[Any, ...]


@dataclass
class Expansion:
    """The expanded config, where placeholders were, and the variables that were missing."""

    value: Any
    expanded_paths: set[Path] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def expand_env(
    config: Any, prefix: Path = (), environ: Mapping[str, str] | None = None
) -> Expansion:
    """Expand placeholders in a copy of `config`; `prefix` is prepended to problem paths."""
    result = Expansion(None)
    result.value = _walk(config, (), result, prefix, os.environ if environ is None else environ)
    return result


def _walk(value: Any, path: Path, result: Expansion, prefix: Path, env: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {key: _walk(item, (*path, key), result, prefix, env) for key, item in value.items()}
    if isinstance(value, list):
        return [
            _walk(item, (*path, index), result, prefix, env) for index, item in enumerate(value)
        ]
    if isinstance(value, str) and "${" in value:
        return _expand(value, path, result, prefix, env)
    return value


def _expand(text: str, path: Path, result: Expansion, prefix: Path, env: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        where = format_path((*prefix, *path))
        result.problems.append(f"{where}: environment variable {name} is not set")
        return match.group(0)

    expanded = _PLACEHOLDER.sub(replace, text)
    if _PLACEHOLDER.fullmatch(text) and not text.startswith("$$"):
        result.expanded_paths.add(path)
    return expanded
