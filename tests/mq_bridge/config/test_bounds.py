"""Hostile and runaway documents: refused by size and depth, never by RecursionError or OOM."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from mq_bridge import Route
from mq_bridge.config.bounds import MAX_DEPTH, MAX_ELEMENTS, check_tree, load_yaml
from mq_bridge.config.loader import load_route, validate_document
from mq_bridge.errors import ConfigError


def laughs(levels: int = 9, width: int = 9) -> str:
    """The classic "billion laughs": each level a list of `width` aliases of the previous."""
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        items = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{items}]")
    return "\n".join(lines) + "\n"


def nested(depth: int, leaf: Any = "x") -> Any:
    """A mapping `depth` levels deep ({"a": {"a": ... leaf}})."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def fanouts(levels: int) -> dict[str, Any]:
    """A route whose output is `levels` fanouts nested in one another."""
    endpoint: dict[str, Any] = {"memory": {"topic": "out"}}
    for _ in range(levels):
        endpoint = {"fanout": [endpoint]}
    return {"input": {"memory": {"topic": "in"}}, "output": endpoint}


def test_a_billion_laughs_is_refused_without_building_it() -> None:
    document = laughs()
    assert len(document) < 600  # 9**9 = 387 million strings once expanded
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as caught:
            validate_document(("str", document))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert f"YAML aliases expand to more than {MAX_ELEMENTS:,} values" in message
    assert "billion laughs" in message
    assert "at line 6," in message  # the first node past the budget: 9**6 > 100,000
    assert peak < 5_000_000  # bytes: nothing near the expansion was built


def test_a_billion_laughs_is_refused_under_a_small_address_space_limit(tmp_path: Path) -> None:
    """Expanding it would need gigabytes; a child limited to 1 GiB still refuses it cleanly."""
    config = tmp_path / "laughs.yaml"
    config.write_text(laughs())
    script = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from mq_bridge.cli import main
        sys.exit(main(["validate", {str(config)!r}]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"mq-bridge: error: {config}: config refused at line 6, column ")
    assert "billion laughs" in line


def test_aliases_are_counted_expanded() -> None:
    levels = 5  # 9**5 strings + the lists holding them: under the budget
    sizes = [10]  # a0: a list of 9 strings
    for _ in range(1, levels):
        sizes.append(1 + 9 * sizes[-1])  # a list of 9 of the previous
    expected = 1 + levels + sum(sizes)  # the top mapping, its keys, its values
    assert expected == 74_738
    value = load_yaml(laughs(levels))
    assert check_tree(value) == expected
    with pytest.raises(ConfigError, match="YAML aliases expand to more than"):
        load_route(("str", laughs(levels + 1)))


def test_plain_documents_and_reused_mappings_have_the_same_budget() -> None:
    shared: list[Any] = ["x"] * 10
    for _ in range(5):
        shared = [shared] * 10  # a million strings, held by 60 list objects
    with pytest.raises(ConfigError, match=f"more than {MAX_ELEMENTS:,} values"):
        Route.from_config({"input": {"memory": {"topic": "t", "extra": shared}}})
    big = json.dumps({"input": {"memory": {"topic": "t"}}, "items": list(range(MAX_ELEMENTS))})
    with pytest.raises(ConfigError, match=f"more than {MAX_ELEMENTS:,} values"):
        load_route(("str", big))
    with pytest.raises(ConfigError, match=f"more than {MAX_ELEMENTS:,} values"):
        load_route(("str", "items:\n" + "- x\n" * (MAX_ELEMENTS + 1)))


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("a: &x [*x]\n", "the alias *x refers to a node that contains it"),
        ("input: &x {memory: {topic: t, x: *x}}\n", "the alias *x refers to a node that"),
        ("a: &x {b: [1, {c: *x}]}\n", "the alias *x refers to a node that contains it"),
    ],
)
def test_a_self_referencing_yaml_document_is_refused(document: str, expected: str) -> None:
    with pytest.raises(ConfigError, match="self-referencing config") as caught:
        load_route(("str", document))
    assert expected in str(caught.value)


def test_a_self_containing_mapping_is_refused_with_its_path() -> None:
    config: dict[str, Any] = {"input": {"memory": {"topic": "t"}}}
    config["input"]["memory"]["again"] = config
    with pytest.raises(ConfigError) as caught:
        Route.from_config(config)
    assert str(caught.value) == "input.memory.again: contains itself (a self-referencing structure)"


@pytest.mark.parametrize(
    "document",
    [
        pytest.param("input: " + "[" * 10_000 + "]" * 10_000 + "\n", id="yaml-flow"),
        pytest.param("input:\n" + "".join("  " * i + "- \n" for i in range(1, 5000)), id="block"),
        pytest.param('{"input": ' + "[" * 100_000 + "]" * 100_000 + "}", id="json"),
        pytest.param('{"input": ' + '{"a": ' * 10_000 + "1" + "}" * 10_001, id="json-maps"),
        pytest.param(
            "a: &a " + "[" * 40 + "]" * 40 + "\nb: " + "[" * 30 + "*a" + "]" * 30 + "\n",
            id="yaml-alias-depth",
        ),
    ],
)
def test_deep_documents_are_refused_by_depth(document: str) -> None:
    with pytest.raises(ConfigError, match=f"nested more than {MAX_DEPTH} levels deep"):
        validate_document(("str", document))


def test_a_deep_mapping_is_refused_before_anything_walks_it() -> None:
    with pytest.raises(ConfigError) as caught:
        Route.from_config({"input": {"memory": {"topic": "t", "x": nested(10_000)}}})
    assert str(caught.value) == (
        f"input.memory.x.a.a.a.a.a...: nested more than {MAX_DEPTH} levels deep"
        " (the limit for a config)"
    )


def test_a_deep_file_is_named_in_the_error(tmp_path: Path) -> None:
    config = tmp_path / "deep.json"
    config.write_text('{"input": ' + '{"a": ' * 2000 + "1" + "}" * 2001)
    with pytest.raises(ConfigError) as caught:
        validate_document(("file", str(config)))
    assert str(caught.value).startswith(f"{config}: config refused: nested more than")


def test_documents_at_the_limits_are_accepted() -> None:
    # The limit counts mappings and lists: this one is exactly MAX_DEPTH deep.
    route = {"input": {"memory": {"topic": "t"}}, "output": {"static": nested(MAX_DEPTH - 3)}}
    assert check_tree(route) > 0
    problems = validate_document(("config", route))
    assert problems and all(": " in problem for problem in problems)  # checked, no crash
    assert validate_document(("str", json.dumps(route))) == problems
    assert validate_document(("str", yaml_dump(route))) == problems
    deepest = fanouts((MAX_DEPTH - 3) // 2)  # route, output, then fanout: [ {...} ] pairs
    assert check_tree(deepest) > 0
    assert validate_document(("config", deepest)) == []
    assert load_route(("config", deepest))["output"]["fanout"][0]["fanout"]
    with pytest.raises(ConfigError, match="nested more than"):
        validate_document(("config", fanouts(MAX_DEPTH // 2)))


def test_a_route_at_the_depth_limit_builds(tmp_path: Path) -> None:
    route = Route.from_config(fanouts((MAX_DEPTH - 3) // 2))
    assert route.name == "route"


def test_an_oversized_file_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mq_bridge.config.documents.MAX_FILE_BYTES", 1000)
    config = tmp_path / "big.yaml"
    config.write_text("input: {memory: {topic: t}}\n" + "# padding\n" * 200)
    with pytest.raises(
        ConfigError, match=r"big.yaml: larger than .* \(the limit for a config file\)"
    ):
        load_route(("file", str(config)))


def test_yaml_anchors_within_the_budget_still_work() -> None:
    document = "input: {memory: &t {topic: shared}}\noutput: {memory: {<<: *t, capacity: 5}}\n"
    route = load_route(("str", document))
    assert route["input"]["memory"]["topic"] == "shared"
    assert route["output"]["memory"]["topic"] == "shared"
    assert route["output"]["memory"]["capacity"] == 5


def yaml_dump(value: Any) -> str:
    import yaml

    return str(yaml.safe_dump(value))
