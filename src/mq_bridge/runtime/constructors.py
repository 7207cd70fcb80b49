"""The constructor family shared by `Route`, `Publisher` and `Consumer`, and the context
manager of the two that only need closing.

Each class says how to build itself from a config source (`_load`); this mixin gives it the
seed's constructors, which differ only by where the document comes from, and the deprecated
aliases, which warn.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

from mq_bridge.config.loader import Source

Built = TypeVar("Built", bound="FromConfig")
Self = TypeVar("Self", bound="ClosedOnExit")


class FromConfig:
    """``from_file`` / ``from_str`` / ``from_config``; ``name`` picks an entry of the
    document's section for this kind (``routes:``, ``publishers:`` or ``consumers:``)."""

    @classmethod
    def _load(cls: type[Built], source: Source, name: str | None) -> Built:
        raise NotImplementedError

    @classmethod
    def from_file(cls: type[Built], path: str, name: str | None = None) -> Built:
        """Build from a YAML or JSON file; `name` picks an entry of its section."""
        return cls._load(("file", path), name)

    @classmethod
    def from_str(cls: type[Built], text: str, name: str | None = None) -> Built:
        """Build from YAML or JSON text; `name` picks an entry of its section."""
        return cls._load(("str", text), name)

    @classmethod
    def from_config(cls: type[Built], config: Mapping[str, Any], name: str | None = None) -> Built:
        """Build from a dict; `name` picks an entry of its section."""
        return cls._load(("config", config), name)

    @classmethod
    def from_yaml(cls: type[Built], path: str, name: str | None = None) -> Built:
        """Deprecated alias of `from_file`."""
        warnings.warn(
            f"{cls.__name__}.from_yaml is deprecated; use {cls.__name__}.from_file",
            DeprecationWarning,
            2,
        )
        return cls.from_file(path, name)

    @classmethod
    def from_yaml_str(cls: type[Built], text: str, name: str | None = None) -> Built:
        """Deprecated alias of `from_str`."""
        warnings.warn(
            f"{cls.__name__}.from_yaml_str is deprecated; use {cls.__name__}.from_str",
            DeprecationWarning,
            2,
        )
        return cls.from_str(text, name)


class ClosedOnExit:
    """``with obj: ...`` closes `obj` at the end of the block (`Publisher`, `Consumer`)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
