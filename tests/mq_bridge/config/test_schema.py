"""config_schema(): assembled from the registries, valid JSON Schema, editors can use it."""

from __future__ import annotations

import json
import sys
import types

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict

from mq_bridge import config_schema as public_config_schema
from mq_bridge.config import config_schema
from mq_bridge.config.declarations import Options
from mq_bridge.config.schema import endpoints, middlewares
from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.middleware.registry import MIDDLEWARE_MODULES


def test_is_a_valid_draft_2020_12_schema_with_every_registered_module() -> None:
    schema = config_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    endpoint_keys = set(schema["$defs"]["Endpoint"]["properties"]) - {"middlewares"}
    assert endpoint_keys == set(ENDPOINT_MODULES)
    assert set(schema["$defs"]["Middleware"]["properties"]) == set(MIDDLEWARE_MODULES)
    json.dumps(schema)  # can be written to a file for editors


def test_every_registered_module_declares_its_options_once() -> None:
    """The declaration (OPTIONS) is the only source: no hand-written SCHEMA beside it."""
    schema = config_schema()
    for plugin in [*endpoints().values(), *middlewares().values()]:
        assert issubclass(plugin.options, BaseModel), plugin.name
        assert not hasattr(plugin.module, "SCHEMA"), plugin.name
        Draft202012Validator.check_schema(plugin.schema)
        published = schema["$defs"][plugin.def_name]
        assert published == {**published, **plugin.schema}, plugin.name  # generated from it
        assert plugin.can_input or plugin.can_output, plugin.name


def test_the_package_root_exposes_the_same_schema() -> None:
    assert public_config_schema() == config_schema()


def test_the_root_is_an_object_of_any_document_shape() -> None:
    """Both peers' root has ``"type": "object"`` (editors and tools key on it); ours keeps
    the `anyOf` that accepts every shape the loaders take, the peers' map of routes too."""
    schema = config_schema()
    assert schema["type"] == "object"
    assert [shape["$ref"] for shape in schema["anyOf"]] == [
        "#/$defs/ConfigSections", "#/$defs/Route", "#/$defs/Endpoint", "#/$defs/RouteMap",
    ]  # fmt: skip
    validator = Draft202012Validator(schema)
    route = {"input": {"memory": {"topic": "a"}}, "output": {"memory": {"topic": "b"}}}
    for document in ({"routes": {"r": route}}, route, {"memory": {"topic": "a"}}, {"r": route}):
        assert validator.is_valid(document), document
    assert not validator.is_valid(["not", "an", "object"])


def test_route_options_have_defaults_and_descriptions() -> None:
    route = config_schema()["$defs"]["Route"]
    options = route["properties"]
    assert route["required"] == ["input"]
    assert options["batch_size"]["default"] == 512
    assert options["output"]["default"] == {"null": {}}
    for name in (
        "batch_size",
        "concurrency",
        "commit_concurrency_limit",
        "startup_timeout_ms",
        "reconnect_interval_ms",
        "empty_batch_delay_ms",
        "allow_fault_injection",
        "description",
    ):
        assert "default" in options[name], name
        assert options[name]["description"], name


@pytest.mark.usefixtures("fakes")
def test_follows_the_registry_and_names_defs_after_the_modules() -> None:
    schema = config_schema()
    defs = schema["$defs"]
    assert defs["Endpoint"]["properties"]["source"] == {"$ref": "#/$defs/SourceConfig"}
    assert defs["SourceConfig"]["properties"]["prefetch"]["default"] == 10
    assert defs["SourceConfig"]["description"] == "source: a fake input-only endpoint."
    assert defs["Middleware"]["properties"]["stamp"] == {"$ref": "#/$defs/StampMiddleware"}
    assert {"required": ["sink"]} in defs["Endpoint"]["oneOf"]
    Draft202012Validator.check_schema(schema)


def test_a_fresh_copy_each_time() -> None:
    schema = config_schema()
    schema["$defs"].clear()
    assert config_schema()["$defs"]


@pytest.mark.usefixtures("fakes")
def test_editor_validation_with_the_public_schema() -> None:
    validator = Draft202012Validator(config_schema())
    good = {"routes": {"r": {"input": {"source": {"queue": "q"}}, "output": {"sink": {}}}}}
    assert not list(validator.iter_errors(good))
    assert not list(validator.iter_errors({"both": None}))
    bad = {"routes": {"r": {"input": {"source": {"queue": "q"}, "sink": {}}}}}
    assert list(validator.iter_errors(bad))


def test_a_module_that_fails_to_import_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENDPOINT_MODULES, "ghost", "mq_bridge.endpoints.no_such_module")
    with pytest.raises(
        ImportError, match=r"endpoint 'ghost' \(mq_bridge.endpoints.no_such_module\)"
    ):
        config_schema()


@pytest.mark.usefixtures("fakes")
def test_two_modules_may_not_claim_the_same_def_name(monkeypatch: pytest.MonkeyPatch) -> None:
    twin = types.ModuleType("fake_twin")

    class TwinOptions(Options):
        model_config = ConfigDict(title="SourceConfig")

    twin.OPTIONS = TwinOptions  # type: ignore[attr-defined]
    twin.build_output = lambda options, context: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_twin", twin)
    monkeypatch.setitem(ENDPOINT_MODULES, "twin", "fake_twin")
    with pytest.raises(ValueError, match=r"endpoint 'twin' would define \$defs/SourceConfig twice"):
        config_schema()
