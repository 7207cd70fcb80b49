"""One declaration per option set: schema fragment, defaults, checks and secrets come from it."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field, model_validator

from mq_bridge.config.declarations import (
    EndpointRef,
    Options,
    parse_options,
    schema_fragment,
    secret_field,
    secret_fields,
)
from mq_bridge.config.loader import validate_document
from mq_bridge.config.redaction import REDACTED, redact
from mq_bridge.config.route_options import RouteOptions
from mq_bridge.config.schema import config_schema
from mq_bridge.endpoints.file.codec import FORMATS
from mq_bridge.endpoints.file.options import FileOptions
from mq_bridge.errors import ConfigError


class Inner(Options):
    size: int = Field(1, ge=1, description="A size.")


class Outer(Options):
    """Outer options for the tests.

    More text that is not the summary.
    """

    title: str = Field("t", description="A property that happens to be called title.")
    inner: Inner | None = Field(None, description="Nested options.")
    target: EndpointRef | None = Field(None, description="A nested endpoint.")
    targets: list[EndpointRef] = Field(default_factory=list, description="Endpoints.")
    token: str | None = secret_field(None, description="A credential.")
    mode: Literal["a", "b"] = Field("a", description="A choice.")

    @model_validator(mode="after")
    def _token_needs_b(self) -> Outer:
        if self.token and self.mode != "b":
            raise ValueError("`token` needs mode b")
        return self


def test_the_fragment_is_self_contained_and_keeps_endpoint_references() -> None:
    fragment = schema_fragment(Outer)
    assert fragment["description"] == "Outer options for the tests."
    assert fragment["additionalProperties"] is False
    properties = fragment["properties"]
    assert properties["title"]["default"] == "t"  # a property named "title" survives
    assert "title" not in properties["inner"]  # pydantic's generated titles do not
    inner = next(branch for branch in properties["inner"]["anyOf"] if branch.get("properties"))
    assert inner["properties"]["size"] == {
        "default": 1,
        "description": "A size.",
        "minimum": 1,
        "type": "integer",
    }
    assert {"$ref": "#/$defs/Endpoint"} in properties["target"]["anyOf"]
    assert properties["targets"]["items"] == {"$ref": "#/$defs/Endpoint"}
    assert properties["mode"]["enum"] == ["a", "b"]
    assert "$defs" not in fragment


def test_secret_fields_are_marked_in_the_schema() -> None:
    assert secret_fields(Outer) == {"token"}
    assert schema_fragment(Outer)["properties"]["token"]["writeOnly"] is True


def test_parse_fills_defaults_and_names_every_problem_with_its_path() -> None:
    parsed = parse_options(Outer, {"inner": {}})
    assert parsed.inner == Inner(size=1) and parsed.mode == "a"
    with pytest.raises(ConfigError) as caught:
        parse_options(Outer, {"inner": {"size": 0}, "colour": "red"}, "routes.r.input.outer")
    assert caught.value.problems == [
        "routes.r.input.outer.inner.size: Input should be greater than or equal to 1",
        "routes.r.input.outer.colour: Extra inputs are not permitted",
    ]
    with pytest.raises(ConfigError, match="`token` needs mode b"):
        parse_options(Outer, {"token": "x"})


def test_parsed_options_are_frozen() -> None:
    parsed = parse_options(Outer, {})
    with pytest.raises(ValueError):
        parsed.mode = "b"  # type: ignore[misc]


def test_route_defaults_come_from_the_declaration_only() -> None:
    route = config_schema()["$defs"]["Route"]["properties"]
    for name, field in RouteOptions.model_fields.items():
        assert route[name]["default"] == field.default, name


def test_file_format_names_agree_with_the_codec() -> None:
    choices = schema_fragment(FileOptions)["properties"]["format"]["enum"]
    assert sorted(choices) == sorted(FORMATS)


def test_validate_runs_the_declarations_own_checks(tmp_path) -> None:
    """What a schema cannot say (one option requiring another) is reported by validate too."""
    path = tmp_path / "log"
    document = {"consumers": {"c": {"file": {"path": str(path), "mode": "group_subscribe"}}}}
    problems = validate_document(("config", document))
    assert problems == ["consumers.c.file.group_id: mode group_subscribe needs a `group_id`"]


def test_declared_secrets_are_redacted_whatever_their_name(fakes_with_secret) -> None:
    assert redact({"vault": {"sesame": "open"}}) == {"vault": {"sesame": REDACTED}}


@pytest.fixture
def fakes_with_secret(monkeypatch: pytest.MonkeyPatch):
    import sys
    import types

    from mq_bridge.endpoints.registry import ENDPOINT_MODULES

    class VaultOptions(Options):
        sesame: str | None = secret_field(None, description="The word that opens it.")

    module = types.ModuleType("fake_vault", "vault: a fake endpoint with a secret.")
    module.OPTIONS = VaultOptions  # type: ignore[attr-defined]
    module.build_output = lambda options, context: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_vault", module)
    monkeypatch.setitem(ENDPOINT_MODULES, "vault", "fake_vault")
