"""The layering rules of docs/design.md ("Layering"), read from the source with `ast`.

Pure: `read_tree(src)` parses every module under a ``src/`` directory into `Module`s
(their imports and their cross-object private attribute reads), and each ``*_violations``
function turns those into `Violation`s. tests/test_layering.py runs them on the real
``src/`` and on small planted trees, so every rule is seen to fail.

    read_tree(src) -> {name: Module} -> rule(modules) -> [Violation]

An import's target is the module it names: ``from a.b import c`` targets ``a.b.c`` when
that is a module of the tree, else ``a.b``. Parent packages that Python imports on the way
are not edges (every module would then sit in a cycle with ``mq_bridge/__init__``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ENDPOINTS = "mq_bridge.endpoints"
#: What sits under endpoints/ and is shared, not an endpoint: anything else there (a package
#: or a module straight under endpoints/) is one endpoint.
SHARED_UNDER_ENDPOINTS = {
    "kit": "the endpoint kit: what two endpoints need lives there once",
    "base": "the endpoint interface",
    "registry": "config name -> endpoint module",
    "python": "the registry of endpoints and middleware written in Python (not an endpoint)",
}
#: What no module under endpoints/ may import.
ABOVE_ENDPOINTS = ("mq_bridge.runtime", "mq_bridge.middleware", "mq_bridge.cli")
#: The twainmq modules the bridge may import (docs/reference/twainmq.md says why).
PUBLIC_TWAINMQ = frozenset({"twainmq", "twainmq.admin"})
#: Underscore names that are public API despite the underscore (namedtuple's, os._exit).
UNDERSCORE_PUBLIC = frozenset({"_asdict", "_replace", "_fields", "_make", "_exit"})


@dataclass(frozen=True)
class Import:
    target: str
    line: int
    #: Runs when the module is imported (not inside a function, not under TYPE_CHECKING).
    at_import: bool


@dataclass(frozen=True)
class PrivateRead:
    """``obj._name`` where obj is neither self/cls nor something this module defines."""

    owner: str  # the expression left of the dot, as written
    name: str
    line: int


@dataclass
class Module:
    name: str
    path: Path
    imports: list[Import] = field(default_factory=list)
    private_reads: list[PrivateRead] = field(default_factory=list)


@dataclass(frozen=True)
class Violation:
    rule: str
    module: str
    detail: str  # what the allow-lists match: an imported module, a cycle, owner._name
    line: int = 0

    def __str__(self) -> str:
        return f"{self.rule}: {self.module}:{self.line}: {self.detail}"


# -- reading the tree ---------------------------------------------------------------------


def read_tree(src: Path) -> dict[str, Module]:
    """Every module under `src` (a ``src/`` layout), by dotted name."""
    paths = {_module_name(src, path): path for path in sorted(src.rglob("*.py"))}
    known = set(paths)
    return {name: _read_module(name, path, known) for name, path in paths.items()}


def _module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _read_module(name: str, path: Path, known: set[str]) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    module = Module(name, path)
    _ImportCollector(module, package, known).visit(tree)
    module.private_reads = list(_private_reads(tree))
    return module


class _ImportCollector(ast.NodeVisitor):
    def __init__(self, module: Module, package: str, known: set[str]) -> None:
        self.module, self.package, self.known = module, package, known
        self.depth = 0  # > 0: inside a function body or a TYPE_CHECKING block

    def _deferred(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _deferred

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._deferred(node)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _absolute(node.module or "", node.level, self.package)
        targets = {f"{base}.{alias.name}" for alias in node.names} & self.known
        if len(targets) < len(node.names):  # some names are not modules: they come from base
            targets.add(base)
        for target in sorted(targets):
            self._add(target, node.lineno)

    def _add(self, target: str, line: int) -> None:
        self.module.imports.append(Import(target, line, at_import=self.depth == 0))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(module: str, level: int, package: str) -> str:
    if level == 0:
        return module
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _private_reads(tree: ast.Module) -> Iterator[PrivateRead]:
    own = _own_private_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        if node.attr in own or node.attr in UNDERSCORE_PUBLIC or _is_self(node.value):
            continue
        yield PrivateRead(ast.unparse(node.value), node.attr, node.lineno)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_self(owner: ast.expr) -> bool:
    if isinstance(owner, ast.Name):
        return owner.id in ("self", "cls")
    return (  # super()._x
        isinstance(owner, ast.Call)
        and isinstance(owner.func, ast.Name)
        and owner.func.id == "super"
    )


def _own_private_names(tree: ast.Module) -> set[str]:
    """The underscore names this module defines anywhere: its functions, classes, class
    attributes and ``self._x = ...`` attributes. Reading one of these off another object
    (``other._x`` in ``__eq__``, ``Class._helper``) stays inside the module that owns it."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.rpartition(".")[2])
    return {name for name in names if _is_private(name)}


# -- the rules ----------------------------------------------------------------------------


def endpoint_violations(modules: dict[str, Module]) -> list[Violation]:
    """An endpoint package importing another endpoint package; anything under endpoints/
    importing the runtime, the middleware or the CLI."""
    endpoints = _endpoints(modules)
    found = []
    for module in modules.values():
        if not _within(module.name, ENDPOINTS):
            continue
        own = _endpoint_of(module.name, endpoints)
        for imported in module.imports:
            other = _endpoint_of(imported.target, endpoints)
            if own and other and other != own:
                found.append(
                    Violation("endpoint", module.name, f"{ENDPOINTS}.{other}", imported.line)
                )
            if any(_within(imported.target, above) for above in ABOVE_ENDPOINTS):
                found.append(Violation("above", module.name, imported.target, imported.line))
    return found


def _endpoints(modules: dict[str, Module]) -> set[str]:
    """The endpoints: each name straight under endpoints/ (a package or a module) but the
    shared ones."""
    return {
        name.split(".")[2] for name in modules if _within(name, ENDPOINTS) and name != ENDPOINTS
    } - set(SHARED_UNDER_ENDPOINTS)


def _endpoint_of(name: str, endpoints: set[str]) -> str | None:
    """``mq_bridge.endpoints.kafka.input`` -> ``kafka``; None outside the endpoints."""
    parts = name.split(".")
    if len(parts) >= 3 and _within(name, ENDPOINTS) and parts[2] in endpoints:
        return parts[2]
    return None


def engine_violations(modules: dict[str, Module]) -> list[Violation]:
    """The bridge importing a private twainmq module; twainmq importing the bridge."""
    found = []
    for module in modules.values():
        for imported in module.imports:
            rule = _engine_rule_broken(module.name, imported.target)
            if rule:
                found.append(Violation(rule, module.name, imported.target, imported.line))
    return found


def _engine_rule_broken(importer: str, target: str) -> str | None:
    if _within(importer, "mq_bridge") and _within(target, "twainmq"):
        return None if target in PUBLIC_TWAINMQ else "private-twainmq"
    if _within(importer, "twainmq") and _within(target, "mq_bridge"):
        return "engine"
    return None


def cycle_violations(modules: dict[str, Module], package: str = "mq_bridge") -> list[Violation]:
    """Each import cycle among `package`'s modules, counting only imports that run when the
    module is imported. One violation per cycle, named by its sorted members.

    Importing ``a.b.c`` also runs ``a/b/__init__``: that is an edge too, unless the package
    is one of the importer's own (a module's package is being imported already)."""
    graph = {
        name: sorted(_import_time_edges(module, modules))
        for name, module in modules.items()
        if _within(name, package)
    }
    return [
        Violation("cycle", members[0], " <-> ".join(members))
        for members in (sorted(c) for c in _strongly_connected(graph))
        if len(members) > 1
    ]


def _import_time_edges(module: Module, modules: dict[str, Module]) -> set[str]:
    own_packages = set(_packages_of(module.name))
    edges = set()
    for imported in module.imports:
        if imported.at_import and imported.target in modules:
            edges.add(imported.target)
            edges.update(p for p in _packages_of(imported.target) if p not in own_packages)
    return edges - {module.name}


def _packages_of(name: str) -> list[str]:
    """``a.b.c`` -> ``["a", "a.b"]``."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def _strongly_connected(graph: dict[str, list[str]]) -> Iterator[list[str]]:
    """Tarjan's algorithm, iterative (the module graph is deep enough for recursion limits)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in graph:
                    continue
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                yield component


def private_access_violations(modules: dict[str, Module]) -> list[Violation]:
    """``obj._name`` reads of another object's private attribute."""
    return [
        Violation("private-access", module.name, f"{read.owner}.{read.name}", read.line)
        for module in modules.values()
        for read in module.private_reads
    ]


def all_violations(modules: dict[str, Module]) -> list[Violation]:
    return [
        *endpoint_violations(modules),
        *engine_violations(modules),
        *cycle_violations(modules),
        *private_access_violations(modules),
    ]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def not_allowed(
    violations: Iterable[Violation], allowed: Iterable[tuple[str, str, str]]
) -> list[Violation]:
    """The violations no (rule, module, detail) entry of `allowed` covers."""
    keys = set(allowed)
    return [v for v in violations if (v.rule, v.module, v.detail) not in keys]
