"""The switch expression language, evaluated on real messages."""

from __future__ import annotations

import pytest

from mq_bridge import Message
from mq_bridge.endpoints.switch.predicates import compile_predicate
from mq_bridge.errors import ConfigError

ORDER = Message.from_json(
    {"amount": 150, "customer": {"tier": "gold"}, "vip": True, "name": "a && b"}, {"kind": "x"}
)
SMALL = Message.from_json({"amount": 50, "vip": False}, {"kind": "y"})
NOT_JSON = Message(b"\xff not json", {"kind": "x"})


@pytest.mark.parametrize(
    ("expression", "order", "small", "not_json"),
    [
        ("amount > 100", True, False, False),
        ('meta.kind == "x"', True, False, True),
        ("meta.kind == 'x' && amount > 100", True, False, False),
        ('amount > 100 and meta.kind == "x"', True, False, False),
        ('customer.tier == "gold"', True, False, False),
        ("!(amount > 100)", False, True, True),
        ("not amount > 100", False, True, True),
        ("amount > 100 || vip", True, False, False),
        ("amount in [1, 2, 50]", False, True, False),
        ("amount >= 100.5", True, False, False),
        ("vip == true", True, False, False),
        ("amount != null", True, True, False),
        ("-amount < -100", True, False, False),
        ('meta.kind in ["x", "z"]', True, False, True),
        ("name == 'a && b'", True, False, False),
        ("50 < amount < 200", True, False, False),
        ('amount > "100"', False, False, False),  # different types never compare true
    ],
)
def test_expressions(expression, order, small, not_json):
    holds = compile_predicate(expression, "when[0].if")
    assert (holds(ORDER), holds(SMALL), holds(NOT_JSON)) == (order, small, not_json)


@pytest.mark.parametrize(
    "expression", ["amount >", '__import__("os")', "f(1)", "a + b", "a $ b", "x[0]", "lambda: 1"]
)
def test_anything_else_is_a_config_error(expression):
    with pytest.raises(ConfigError, match=r"^when\[0\]\.if: "):
        compile_predicate(expression, "when[0].if")


def test_python_attributes_are_never_reached():
    holds = compile_predicate("amount.__class__ == null && meta.__doc__ == null", "p")
    assert holds(ORDER)  # looked up as fields of the payload/metadata, found missing
