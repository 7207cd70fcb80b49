"""Predicates for `switch` in `when` mode: small expressions over a message.

    amount > 100 && meta.kind == "order"
    customer.tier in ["gold", "silver"] || !(vip == false)

Names are payload fields (the payload is decoded as JSON once per message, only when an
expression needs it), dotted for nested objects; ``meta.<key>`` is a metadata value.
Literals: numbers, 'single' or "double" quoted strings, true, false, null, [lists].
Operators: == != < <= > >= in, && / and, || / or, ! / not, parentheses, unary minus.
A missing field is null; a comparison between values of different types is false.

Expressions are translated token by token into a Python expression, parsed with `ast`,
and checked against the short list of node types above before anything is evaluated:
nothing is ever passed to `eval`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from mq_bridge.errors import ConfigError
from mq_bridge.message import Message

__all__ = ["Predicate", "compile_predicate"]

Predicate = Callable[[Message], bool]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<number>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>&&|\|\||==|!=|<=|>=|[<>!()\[\],.-])
    )""",
    re.VERBOSE,
)
_WORDS = {
    "and": "and",
    "or": "or",
    "not": "not",
    "in": "in",
    "true": "True",
    "false": "False",
    "null": "None",
}
_OPS = {"&&": " and ", "||": " or ", "!": " not "}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.Compare,
    ast.Name,
    ast.Attribute,
    ast.Constant,
    ast.List,
    ast.Load,
    *_COMPARE,
)


def compile_predicate(text: str, path: str) -> Predicate:
    """A predicate for `text`; a `ConfigError` at `path` when it is not a valid expression."""
    try:
        tree = ast.parse(_to_python(text), mode="eval")
    except (SyntaxError, ValueError) as error:
        raise ConfigError(f"cannot parse {text!r}: {error}", path) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ConfigError(f"{text!r} uses {type(node).__name__}, not allowed here", path)
    needs_payload = any(isinstance(n, ast.Name) and n.id != "meta" for n in ast.walk(tree))
    return lambda message: _truthy(_evaluate(tree.body, _Scope(message, needs_payload)))


def _to_python(text: str) -> str:
    parts, position = [], 0
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"unexpected {text[position:].strip()[:10]!r}")
        position = match.end()
        kind, token = match.lastgroup, match.group(match.lastgroup or 0)
        if kind == "name":
            parts.append(_WORDS.get(token, token))
        elif kind == "op":
            parts.append(_OPS.get(token, token))
        else:
            parts.append(token)
        parts.append(" " if kind != "op" or token not in ".([" else "")
    return "".join(parts).replace(" .", ".").replace(" ]", "]").replace(" )", ")").strip()


class _Scope:
    """Field lookups for one message; the JSON payload is decoded at most once."""

    def __init__(self, message: Message, needs_payload: bool) -> None:
        self.message = message
        self._payload: Any = None
        self._decoded = not needs_payload

    def payload(self) -> Any:
        if not self._decoded:
            self._decoded = True
            try:
                self._payload = self.message.json()
            except ValueError:
                self._payload = None
        return self._payload


def _evaluate(node: ast.AST, scope: _Scope) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BoolOp):
        values = (_truthy(_evaluate(v, scope)) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, scope)
        return not _truthy(value) if isinstance(node.op, ast.Not) else _negate(value)
    if isinstance(node, ast.Compare):
        return _compare(node, scope)
    if isinstance(node, ast.List):
        return [_evaluate(item, scope) for item in node.elts]
    return _lookup(node, scope)


def _compare(node: ast.Compare, scope: _Scope) -> bool:
    left = _evaluate(node.left, scope)
    for op, comparator in zip(node.ops, node.comparators):
        right = _evaluate(comparator, scope)
        try:
            if not _COMPARE[type(op)](left, right):
                return False
        except TypeError:
            return False
        left = right
    return True


def _lookup(node: ast.AST, scope: _Scope) -> Any:
    path: list[str] = []
    while isinstance(node, ast.Attribute):
        path.append(node.attr)
        node = node.value
    assert isinstance(node, ast.Name)
    path.append(node.id)
    path.reverse()
    if path[0] == "meta" and len(path) == 2:
        return scope.message.get(path[1])
    value = scope.payload()
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _truthy(value: Any) -> bool:
    return bool(value)


def _negate(value: Any) -> Any:
    return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
