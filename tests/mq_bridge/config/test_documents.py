"""Loading documents: sources, shapes, picking entries by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mq_bridge.config.loader import load_endpoint, load_route
from mq_bridge.errors import ConfigError

SEED_SAMPLE = {
    "routes": {
        "orders": {
            "input": {"memory": {"topic": "orders.in", "capacity": 1600}},
            "output": {"response": {}},
            "batch_size": 128,
        }
    }
}

YAML_DOC = """
routes:
  orders:
    input:
      memory: {topic: orders.in}
    output:
      null:
    batch_size: 64
  audit:
    input:
      memory: {topic: audit}
publishers:
  to_orders:
    memory: {topic: orders.in}
consumers:
  from_orders:
    memory: {topic: orders.in}
"""


def test_the_seed_sample_loads_with_defaults_applied() -> None:
    route = load_route(("config", SEED_SAMPLE), "orders")
    assert route["name"] == "orders"
    assert route["batch_size"] == 128
    assert route["concurrency"] == 1
    assert route["commit_concurrency_limit"] == 4096
    assert route["allow_fault_injection"] is False
    assert route["input"]["memory"]["topic"] == "orders.in"
    assert route["input"]["memory"]["capacity"] == 1600
    assert route["input"]["middlewares"] == []
    assert route["output"] == {"response": {}, "middlewares": []}


def test_loading_does_not_change_the_callers_mapping() -> None:
    before = json.dumps(SEED_SAMPLE, sort_keys=True)
    load_route(("config", SEED_SAMPLE), "orders")
    assert json.dumps(SEED_SAMPLE, sort_keys=True) == before


def test_yaml_file_with_sections(tmp_path: Path) -> None:
    path = tmp_path / "bridge.yaml"
    path.write_text(YAML_DOC)
    route = load_route(("file", path), "orders")
    assert route["batch_size"] == 64
    assert "null" in route["output"]  # YAML's `null:` key is the null endpoint
    publisher = load_endpoint(("file", str(path)), "to_orders", "publishers", "output")
    assert publisher["memory"]["topic"] == "orders.in"
    consumer = load_endpoint(("file", path), "from_orders", "consumers", "input")
    assert consumer["middlewares"] == []


def test_file_format_is_decided_by_content_not_extension(tmp_path: Path) -> None:
    path = tmp_path / "route.yaml"
    path.write_text(json.dumps({"input": {"memory": {"topic": "t"}}}))
    assert load_route(("file", path), None)["input"]["memory"]["topic"] == "t"
    path = tmp_path / "route.json"
    path.write_text("input:\n  memory:\n    topic: t\n")
    assert load_route(("file", path), None)["input"]["memory"]["topic"] == "t"


def test_string_sources_in_json_and_yaml() -> None:
    as_json = json.dumps(SEED_SAMPLE)
    assert load_route(("str", as_json), "orders")["batch_size"] == 128
    assert load_route(("str", "input: {memory: {topic: t}}"), None)["name"] == "route"


def test_bare_route_gets_null_output_and_default_name() -> None:
    route = load_route(("config", {"input": {"memory": {"topic": "t"}}}), None)
    assert route["output"] == {"null": {}, "middlewares": []}
    assert route["name"] == "route"
    assert route["batch_size"] == 512


def test_bare_route_takes_the_given_name() -> None:
    route = load_route(("config", {"input": {"memory": {"topic": "t"}}}), "mine")
    assert route["name"] == "mine"


def test_a_single_route_is_picked_without_a_name() -> None:
    doc = {"routes": {"only": {"input": {"memory": {"topic": "t"}}}}}
    assert load_route(("config", doc), None)["name"] == "only"


def test_mq_bridge_style_map_of_routes() -> None:
    doc = {"a": {"input": {"memory": {"topic": "a"}}}, "b": {"input": {"memory": {"topic": "b"}}}}
    assert load_route(("config", doc), "b")["input"]["memory"]["topic"] == "b"


def test_bare_endpoint() -> None:
    endpoint = load_endpoint(("config", {"memory": {"topic": "t"}}), None, "publishers", "output")
    assert endpoint["memory"]["topic"] == "t"
    assert endpoint["middlewares"] == []


def test_missing_name_lists_the_available_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        load_route(("str", YAML_DOC), "order")
    message = str(caught.value)
    assert "no route named 'order'; did you mean 'orders'?" in message
    assert "available routes: audit, orders" in message


def test_several_routes_and_no_name() -> None:
    with pytest.raises(ConfigError, match=r"2 routes \(audit, orders\); pass a name"):
        load_route(("str", YAML_DOC), None)


def test_publishers_are_not_taken_from_routes() -> None:
    with pytest.raises(ConfigError) as caught:
        load_endpoint(("str", YAML_DOC), "orders", "publishers", "output")
    assert "no publisher named 'orders'" in str(caught.value)
    assert "a route named 'orders' exists under routes:" in str(caught.value)


def test_missing_section_is_named() -> None:
    doc = {"routes": {"r": {"input": {"memory": {"topic": "t"}}}}}
    with pytest.raises(ConfigError, match="no consumers: section"):
        load_endpoint(("config", doc), "c", "consumers", "input")


def test_misspelt_section() -> None:
    doc = {"routes": {}, "publisher": {"p": {"memory": {"topic": "t"}}}}
    with pytest.raises(ConfigError, match="publisher: unknown section; did you mean 'publishers'"):
        load_endpoint(("config", doc), "p", "publishers", "output")


def test_route_where_an_endpoint_is_expected_and_back() -> None:
    with pytest.raises(ConfigError, match="this is a route, not an endpoint"):
        load_endpoint(("config", {"input": {"memory": {"topic": "t"}}}), None, "consumers", "input")
    with pytest.raises(ConfigError, match="this is an endpoint, not a route"):
        load_route(("config", {"memory": {"topic": "t"}}), None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the config is empty"),
        ("{}", "the config is empty"),
        ("- a\n- b\n", "a config must be a mapping, got list"),
        ("input: [unclosed", "invalid YAML at line 1"),
        ('{"input": {"memory": }', "invalid JSON at line 1, column 22"),
    ],
)
def test_unreadable_documents(text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace("[", r"\[")):
        load_route(("str", text), None)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file not found: .*nope\.yaml"):
        load_route(("file", tmp_path / "nope.yaml"), None)
    with pytest.raises(ConfigError, match="is a directory"):
        load_route(("file", tmp_path), None)
    broken = tmp_path / "broken.yaml"
    broken.write_text("input:\n  memory: {topic: t}\n bad indent: 1\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: invalid YAML at line 3"):
        load_route(("file", broken), None)
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("input:\n  memory: {topic: t, capasity: 5}\n")
    with pytest.raises(ConfigError, match=r"invalid.yaml: input.memory.capasity: unknown option"):
        load_route(("file", invalid), None)


def test_wrong_source_kinds() -> None:
    with pytest.raises(ConfigError, match="unknown config source kind 'url'"):
        load_route(("url", "http://x"), None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must be str"):
        load_route(("str", b"input: {}"), None)
    with pytest.raises(ConfigError, match="a config must be a mapping"):
        load_route(("config", ["input"]), None)


def test_a_config_written_for_mq_bridge_1_2_loads() -> None:
    peer_style = """
orders:
  description: orders to the audit log
  input:
    memory: {url: "memory://orders", capacity: 100, enable_nack: true}
  output:
    null: null
  batch_size: 1
  concurrency: 4
  commit_concurrency_limit: 64
  startup_timeout_ms: 1000
  reconnect_interval_ms: 100
  empty_batch_delay_ms: 0
"""
    route = load_route(("str", peer_style), "orders")
    assert route["input"]["memory"]["url"] == "memory://orders"
    assert route["output"]["middlewares"] == []
    assert (route["batch_size"], route["concurrency"]) == (1, 4)
