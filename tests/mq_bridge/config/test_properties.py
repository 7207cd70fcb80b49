"""Properties of the pure config helpers, over generated config trees."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mq_bridge.config.env import expand_env
from mq_bridge.config.redaction import REDACTED, is_secret_key, redact

keys = st.sampled_from(["topic", "password", "api_key", "url", "capacity", "token", "name"])
scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
trees = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)


def _secrets_hidden(tree: Any) -> bool:
    """Whether every value under a secret key (at any depth) is ``***`` or None."""
    if isinstance(tree, dict):
        return all(
            value in (REDACTED, None) if is_secret_key(key) else _secrets_hidden(value)
            for key, value in tree.items()
        )
    if isinstance(tree, list):
        return all(_secrets_hidden(item) for item in tree)
    return True


@given(trees)
def test_redact_hides_every_secret_value_and_is_idempotent(tree: Any) -> None:
    redacted = redact(tree)
    assert _secrets_hidden(redacted)
    assert redact(redacted) == redacted


@given(trees.filter(lambda tree: "${" not in json.dumps(tree)))
def test_expanding_a_tree_without_placeholders_changes_nothing(tree: Any) -> None:
    expansion = expand_env(tree, environ={})
    assert expansion.value == tree
    assert not expansion.problems
    assert not expansion.expanded_paths
