"""Limits on what a config document may be, checked before anything walks it.

A config is small: a few routes of a few dozen options, nested a dozen levels at most. A
hostile or broken one must not cost more than that to refuse:

- ``MAX_DEPTH`` levels of mappings and lists (a list of lists of ... counts each);
- ``MAX_ELEMENTS`` values in all (every key, value and list item, counted once per place it
  appears, so after YAML aliases are expanded);
- ``MAX_FILE_BYTES`` bytes in a config file.

YAML is parsed by `load_yaml`, a ``SafeLoader`` that counts while it composes: each node's
expanded size and height are known when it ends, and an alias costs the size of the node it
names, so a "billion laughs" document of nested aliases is refused after reading it once,
without building anything bigger than its text; an alias to a node that contains it (``&x
[*x]``) is refused as self-referencing. JSON text gets a bracket count before `json.loads`
(`check_json_depth`). A mapping given in Python goes through `check_tree`, a loop (not a
recursion) that stops at the first limit crossed and also refuses a structure containing
itself. Everything after these checks (env expansion, defaults, validation, the builders)
may then recurse freely.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mq_bridge.config.problems import format_path
from mq_bridge.errors import ConfigError

__all__ = [
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_FILE_BYTES",
    "LimitExceeded",
    "check_json_depth",
    "check_tree",
    "load_yaml",
]

#: Mappings and lists nested in one another. Real configs need about 12 (a route in a
#: section, a fanout of a switch of a fanout, a middleware's nested endpoint); the
#: validator and the builders recurse about 6 frames a level, well inside Python's limit.
MAX_DEPTH = 64
#: Keys, values and list items in all, aliases expanded. A route is about 30; validating
#: this many takes about a second.
MAX_ELEMENTS = 100_000
#: Bytes of a config file.
MAX_FILE_BYTES = 16 * 1024 * 1024


class LimitExceeded(ValueError):
    """A limit crossed while parsing; `line` and `column` are 1-based, 0 when unknown."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.column = column

    def where(self) -> str:
        return f" at line {self.line}, column {self.column}" if self.line else ""


def too_deep() -> str:
    return f"nested more than {MAX_DEPTH} levels deep (the limit for a config)"


def too_many(via_alias: bool = False) -> str:
    if via_alias:
        return (
            f"YAML aliases expand to more than {MAX_ELEMENTS:,} values (the limit for a"
            " config); is this a document of nested aliases (a 'billion laughs')?"
        )
    return f"more than {MAX_ELEMENTS:,} values (the limit for a config)"


# --- Python structures ------------------------------------------------------------------

_EXIT = object()


def check_tree(value: Any) -> int:
    """The number of values in `value`; `ConfigError` (with the path) past a limit or for a
    structure that contains itself. Iterative, and stops at the first problem."""
    elements = 0
    ancestors: set[int] = set()  # ids of the containers on the current path
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if item is _EXIT:
            ancestors.discard(path[0])
            continue
        elements += 1
        children: list[tuple[Any, Any]] | None = None  # None: not a container
        if isinstance(item, Mapping):
            children = list(item.items())
            elements += len(children)  # the keys
        elif isinstance(item, (list, tuple)):
            children = list(enumerate(item))
        if elements > MAX_ELEMENTS:
            raise ConfigError(f"the config has {too_many()}")
        if children is None:
            continue
        if id(item) in ancestors:
            raise _at(path, "contains itself (a self-referencing structure)")
        if len(path) >= MAX_DEPTH:
            raise _at(path, too_deep())
        ancestors.add(id(item))
        stack.append((_EXIT, (id(item),)))
        stack.extend((child, (*path, key)) for key, child in reversed(children))
    return elements


def _at(path: tuple[Any, ...], message: str) -> ConfigError:
    if not path:
        return ConfigError(f"the config {message}")
    shown = format_path(path[:8]) + ("..." if len(path) > 8 else "")
    return ConfigError(f"{shown}: {message}")


# --- JSON -------------------------------------------------------------------------------

_JSON_SKIPPED = re.compile(r'"(?:[^"\\]|\\.)*"?|\'(?:[^\']|\'\')*\'?|#[^\n]*')
_BRACKETS = re.compile(r"[\[\]{}]")


def check_json_depth(text: str) -> None:
    """`LimitExceeded` if the brackets of `text` (outside strings) nest past `MAX_DEPTH`.

    Quoted strings are skipped (double-quoted as JSON writes them; single-quoted and
    ``#`` comments as flow-style YAML may have them), so this is exact for JSON and an
    over-estimate at worst for YAML, whose own loader checks again anyway.
    """
    depth = 0
    for chunk in _JSON_SKIPPED.split(text):
        for bracket in _BRACKETS.findall(chunk):
            if bracket in "[{":
                depth += 1
                if depth > MAX_DEPTH:
                    raise LimitExceeded(too_deep())
            else:
                depth = max(depth - 1, 0)


# --- YAML -------------------------------------------------------------------------------


def load_yaml(text: str) -> Any:
    """`text` parsed as YAML (safe tags only), within the limits; `LimitExceeded` if not,
    ``yaml.YAMLError`` for a syntax error."""
    loader = _loader_class()(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


_LOADER: Any = None


def _loader_class() -> Any:
    """The bounded loader class, made when first needed (PyYAML loads with the first
    document, not with `import mq_bridge`)."""
    global _LOADER
    if _LOADER is None:
        _LOADER = _make_loader()
    return _LOADER


def _make_loader() -> Any:
    import yaml
    from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
    from yaml.nodes import MappingNode, Node, SequenceNode

    class BoundedSafeLoader(yaml.SafeLoader):
        """``SafeLoader`` counting every node's expanded size and height as it composes."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.open_containers = 0
            self.composed = 0  # nodes written out in the text (aliases not expanded)
            #: node -> (values it expands to, containers nested in it); set when it ends,
            #: so an alias to a node without one is an alias to a node still open.
            self.measures: dict[Node, tuple[int, int]] = {}

        def compose_node(self, parent: Node | None, index: Any) -> Node | None:
            event = self.peek_event()
            if isinstance(event, AliasEvent):
                target = self.anchors.get(event.anchor)
                if target is not None and target not in self.measures:
                    raise self.refusal(
                        f"the alias *{event.anchor} refers to a node that contains it "
                        "(a self-referencing config)",
                        event,
                    )
                return super().compose_node(parent, index)
            if self.composed >= MAX_ELEMENTS:  # a large text: refused before reading it all
                raise self.refusal(too_many(), event)
            container = isinstance(event, (SequenceStartEvent, MappingStartEvent))
            if container:
                self.open_containers += 1
                if self.open_containers > MAX_DEPTH:
                    raise self.refusal(too_deep(), event)
            node = super().compose_node(parent, index)
            self.composed += 1
            if container:
                self.open_containers -= 1
            if node is not None:
                self.measure(node, event)
            return node

        def measure(self, node: Node, event: Any) -> None:
            if isinstance(node, SequenceNode):
                children = list(node.value)
            elif isinstance(node, MappingNode):
                children = [child for pair in node.value for child in pair]
            else:
                self.measures[node] = (1, 0)
                return
            measures = [self.measures[child] for child in children]
            size = 1 + sum(size for size, _ in measures)
            height = 1 + max((height for _, height in measures), default=0)
            self.measures[node] = (size, height)
            if size > MAX_ELEMENTS:
                raise self.refusal(too_many(via_alias=size > self.composed), event)
            if height > MAX_DEPTH:  # only through aliases: open containers are counted
                raise self.refusal(too_deep(), event)

        def refusal(self, message: str, event: Any) -> LimitExceeded:
            mark = event.start_mark
            return LimitExceeded(message, mark.line + 1, mark.column + 1)

    return BoundedSafeLoader
