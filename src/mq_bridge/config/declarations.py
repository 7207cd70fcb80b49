"""One declaration per option set: a pydantic model is the single source of its options.

Every endpoint, every middleware and the route itself declare their options as a subclass
of `Options`. From that one class come:

- its JSON Schema fragment (`schema_fragment`), which `config_schema()` assembles and the
  config validator checks documents against (every problem with its path, did-you-mean);
- its defaults (the schema's ``default`` values, filled in before validation);
- the checks a schema cannot say (a pydantic ``model_validator``), run by `parse_options`
  after the schema checks, so ``mq-bridge validate`` and ``start()`` agree;
- which fields hold secrets (`secret_field`; ``writeOnly`` in the schema, read by redaction);
- one rule for every string of every option set: UTF-8 text without NUL (see `Options`);
- the ``mq_bridge.config`` TypedDicts (generated from the assembled schema by
  ``scripts/gen_config_types.py``; a test fails when they drift).

An option set that is not a mapping (``static: "body"``, ``fanout: [...]``) is declared as a
pydantic ``RootModel`` instead; everything above applies to it the same way.

A field that holds a nested endpoint (``fanout``, ``switch``, ``dlq``) is typed `EndpointRef`:
a plain mapping whose schema refers to ``#/$defs/Endpoint``.

    class RetryOptions(Options):
        max_attempts: int = Field(3, ge=0, description="Sends in all, the first included.")

    RetryOptions.model_validate({"max_attempts": 5}).max_attempts   # 5
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, ClassVar, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from mq_bridge.errors import ConfigError

__all__ = [
    "MAX_INT64",
    "MAX_MILLISECONDS",
    "MAX_SECONDS",
    "EndpointRef",
    "InputEndpointRef",
    "OptionError",
    "Options",
    "declaration_problems",
    "parse_options",
    "schema_fragment",
    "secret_field",
    "secret_fields",
]

OptionsT = TypeVar("OptionsT", bound=BaseModel)
_ENDPOINT_MARKER = "x-endpoint-ref"
_INPUT_ENDPOINT_MARKER = "x-input-endpoint-ref"

#: The upper bound of every duration option in milliseconds (``*_ms``): 2**31 - 1, about
#: 24.8 days. The runtime hands these to ``threading`` waits and ``time.sleep``, which raise
#: `OverflowError` past ``threading.TIMEOUT_MAX`` (about 49.7 days on Windows), so a larger
#: value would pass validation and then fail the running route.
MAX_MILLISECONDS = 2**31 - 1
#: The upper bound of a span in seconds that the runtime adds to ``time.time()``: 2**31 - 1
#: (about 68 years); an integer beyond a float's range raises `OverflowError` there.
MAX_SECONDS = 2**31 - 1
#: The largest count or size a server keeps as a signed 64-bit integer (Redis, NATS).
MAX_INT64 = 2**63 - 1


class Options(BaseModel):
    """Base of every option declaration: unknown keys are errors, parsed options are frozen.

    `NULL_IS_DEFAULT` names the options where ``null`` means "use the default", as the
    peers' schemas allow (``request_timeout_ms: null``): such keys are dropped before
    validation, so the field's default applies.

    No string of an option (nor a key or an item of a mapping or list option) may hold a NUL
    character: the native drivers take C strings, which end at the first NUL, so a value is
    cut short without a word (``tcp://127.0.0.1:5\\0`` connects to port 5) or becomes one
    the driver never expected (a Kafka ``group_id`` of ``"\\0"`` is an empty group id, and
    librdkafka aborts the process on it). `NUL_ALLOWED` names the options that may hold one
    because no driver reads them as C strings (a static body, a ZeroMQ topic prefix, which is
    bytes). Nor may a string be other than UTF-8 text (a lone surrogate): every driver
    encodes it, and the error would come at run time. A nested endpoint (`EndpointRef`) is
    checked by its own declaration.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=False)

    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset()
    NUL_ALLOWED: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        nullable = cls.NULL_IS_DEFAULT
        if nullable and isinstance(data, dict):
            return {k: v for k, v in data.items() if not (v is None and k in nullable)}
        return data

    @field_validator("*", mode="after")
    @classmethod
    def _refuse_bad_text(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        if name is None or name in _endpoint_fields(cls):
            return value
        found = _bad_text(value, allow_nul=name in cls.NUL_ALLOWED)
        if found is not None:
            where, message = found
            raise OptionError(where, message) if where else ValueError(message)
        return value


class OptionError(ValueError):
    """Raised by a declaration's validator for a problem that belongs to one option.

        raise OptionError("group_id", "mode group_subscribe needs a `group_id`")

    reports ``<path>.group_id: mode group_subscribe needs a `group_id```. A tuple names a
    place inside an option: ``OptionError(("headers", "x-id"), ...)``.
    """

    def __init__(self, option: str | tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.option = option


#: A nested endpoint config such as ``{"memory": {"topic": "dead"}}`` (validated as an output).
#: (Pydantic resolves every ``$ref`` it generates, so the reference is written by
#: `schema_fragment` in place of this marker.)
EndpointRef = Annotated[dict[str, Any], WithJsonSchema({_ENDPOINT_MARKER: True})]
#: A nested endpoint config that is read from (``reader``): validated as an input.
InputEndpointRef = Annotated[dict[str, Any], WithJsonSchema({_INPUT_ENDPOINT_MARKER: True})]


_Place = tuple[str | int, ...]


def _bad_text(value: Any, allow_nul: bool, where: _Place = ()) -> tuple[_Place, str] | None:
    """(path below the option, message) for the first string in `value` that a driver
    cannot take: one with a NUL character (unless `allow_nul`), or one that is not UTF-8
    text (a lone surrogate, which JSON's ``"\\ud800"`` can spell)."""
    if isinstance(value, str):
        problem = _text_problem(value, allow_nul)
        return None if problem is None else (where, problem)
    items: Any = ()
    if isinstance(value, Mapping):
        for key in value:
            problem = _text_problem(key, allow_nul) if isinstance(key, str) else None
            if problem is not None:
                return where, f"the key {key!r} {problem}"
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    for key, item in items:
        found = _bad_text(item, allow_nul, (*where, key))
        if found is not None:
            return found
    return None  # numbers, booleans, and nested option sets (checked by their own rule)


def _text_problem(text: str, allow_nul: bool) -> str | None:
    index = -1 if allow_nul else text.find("\0")
    if index >= 0:
        return (
            f"must not contain a NUL character (\\x00, at index {index}): drivers end a "
            "string there"
        )
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as error:
            return (
                f"must be UTF-8 text: a lone surrogate ({text[error.start]!r}) at index "
                f"{error.start} cannot be encoded"
            )
    return None


@cache
def _endpoint_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of `model` that hold nested endpoints (`EndpointRef`, also in a dict)."""
    return frozenset(
        name
        for name, field in model.model_fields.items()
        if any(_refers_to_endpoint(item) for item in (*field.metadata, field.annotation))
    )


def _refers_to_endpoint(node: Any) -> bool:
    if isinstance(node, WithJsonSchema):
        schema = node.json_schema or {}
        return any(schema.get(marker) for marker, _ in _MARKERS)
    return any(_refers_to_endpoint(item) for item in get_args(node))  # Annotated's too


def secret_field(default: Any = None, *, description: str, **kwargs: Any) -> Any:
    """A field whose value is a credential: never shown in reprs, logs or error messages."""
    extra: dict[str, Any] = {"writeOnly": True}
    return Field(default, description=description, json_schema_extra=extra, repr=False, **kwargs)


def secret_fields(model: type[BaseModel]) -> frozenset[str]:
    """The names of `model`'s fields declared with `secret_field`."""
    return frozenset(
        name
        for name, field in model.model_fields.items()
        if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("writeOnly")
    )


def schema_fragment(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON Schema as one self-contained fragment.

    The model's own ``$defs`` (nested option models, enums) are inlined, so the fragment
    can sit under any name in the assembled document; references to the document's own
    definitions (``#/$defs/Endpoint``) are kept. Pydantic's generated ``title``s go: the
    property names say it.
    """
    schema = model.model_json_schema(mode="validation")
    local_defs = schema.pop("$defs", {})
    fragment = _inline(schema, local_defs)
    if fragment.get("type") == "object" and not fragment.get("required"):
        fragment["type"] = ["object", "null"]  # ``memory:`` with no value: all defaults
    fragment.pop("description", None)  # pydantic's is the whole docstring: keep its summary
    doc = (model.__doc__ or "").strip()
    if doc:
        fragment["description"] = " ".join(doc.split("\n\n")[0].split())
    return fragment


def parse_options(model: type[OptionsT], options: Any, path: str = "") -> OptionsT:
    """`options` (a config block, already schema-checked) as `model`; `ConfigError` names
    every problem with its path under `path`."""
    if isinstance(options, model):
        return options
    try:
        return model.model_validate({} if options is None else options)
    except ValidationError as error:
        problems = _problems(error, path)
        raise ConfigError(problems[0], problems=problems) from None


def declaration_problems(error: ValidationError) -> list[tuple[tuple[str | int, ...], str]]:
    """Each problem of a declaration's `ValidationError` as (location, message)."""
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        location = tuple(item["loc"])
        cause = (item.get("ctx") or {}).get("error")
        if isinstance(cause, OptionError):
            inside = cause.option if isinstance(cause.option, tuple) else (cause.option,)
            location = (*location, *inside)
        problems.append((location, str(item["msg"]).removeprefix("Value error, ")))
    return problems


def _problems(error: ValidationError, path: str) -> list[str]:
    lines = []
    for location, message in declaration_problems(error):
        where = ".".join([path, *(str(part) for part in location)]).strip(".")
        lines.append(f"{where}: {message}" if where else message)
    return lines


_MARKERS = ((_ENDPOINT_MARKER, "Endpoint"), (_INPUT_ENDPOINT_MARKER, "InputEndpoint"))


def _inline(node: Any, local_defs: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(item, local_defs) for item in node]
    if not isinstance(node, dict):
        return node
    for marker, target in _MARKERS:
        if node.get(marker):
            rest = {key: value for key, value in node.items() if key != marker}
            return {"$ref": f"#/$defs/{target}", **_inline(rest, local_defs)}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.rsplit("/", 1)[-1]
        if name in local_defs:
            rest = {key: value for key, value in node.items() if key != "$ref"}
            return _inline({**copy.deepcopy(local_defs[name]), **rest}, local_defs)
    # A generated ``title`` is a string; a property named "title" holds a schema (a dict).
    return {
        key: _inline(value, local_defs)
        for key, value in node.items()
        if not (key == "title" and isinstance(value, str))
    }
