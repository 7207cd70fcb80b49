"""switch: routes each message to one of several outputs, by predicate or metadata value.

Features
    - Predicate mode: `when` is an ordered list of ``{if: <expression>, to: <endpoint>}``;
      the first expression that holds picks the output (expressions: see `_predicates`,
      e.g. ``amount > 100 && meta.kind == "order"``). Invalid expressions fail at start.
    - Value-lookup mode: the value of metadata `metadata_key` picks the output in `cases`.
    - Both may be given: `when` is tried first. Messages nothing matches go to `default`,
      and fail (not retriable: dead-lettered, or logged and dropped) when there is none.
    - Each output may carry its own `middlewares`; a batch is split per output, keeping order.

Options
    when           list of {if, to} (predicate mode)
    metadata_key   the metadata key whose value picks the case (value-lookup mode)
    cases          map of metadata value -> endpoint config
    default        endpoint config for everything else (optional)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mq_bridge.endpoints._predicates import Predicate, compile_predicate
from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.errors import ConfigError, NonRetryableError, SendError
from mq_bridge.message import Message

__all__ = ["SCHEMA", "SwitchOutput", "build_output"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metadata_key": {"type": "string", "default": ""},
        "cases": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Endpoint"}},
        "when": {
            "type": "array",
            "default": [],
            "items": {
                "type": "object",
                "properties": {
                    "if": {"type": "string", "description": "e.g. amount > 100"},
                    "to": {"$ref": "#/$defs/Endpoint"},
                },
                "required": ["if", "to"],
                "additionalProperties": False,
            },
        },
        "default": {"anyOf": [{"$ref": "#/$defs/Endpoint"}, {"type": "null"}]},
    },
    "additionalProperties": False,
}


class SwitchOutput(OutputEndpoint):
    """Sends each message to the output its metadata value selects."""

    def __init__(
        self,
        key: str,
        cases: dict[str, OutputEndpoint],
        default: OutputEndpoint | None,
        when: list[tuple[Predicate, OutputEndpoint]] | None = None,
    ) -> None:
        self._key = key
        self._cases = cases
        self._default = default
        self._when = when or []

    def _all(self) -> list[OutputEndpoint]:
        outputs = [*(o for _, o in self._when), *self._cases.values()]
        return outputs + ([self._default] if self._default else [])

    def _pick(self, message: Message) -> OutputEndpoint | None:
        for holds, output in self._when:
            if holds(message):
                return output
        value = message.get(self._key) if self._key else None
        return self._cases.get(value, self._default) if value is not None else self._default

    def connect(self) -> None:
        for output in self._all():
            output.connect()

    def send(self, messages: Sequence[Message]) -> None:
        groups: dict[int, tuple[OutputEndpoint, list[int]]] = {}
        failures: dict[int, BaseException] = {}
        for index, message in enumerate(messages):
            output = self._pick(message)
            if output is None:
                value = message.get(self._key) if self._key else None
                failures[index] = NonRetryableError(
                    f"switch: no case matches ({self._key}={value!r}) and there is no default"
                )
                continue
            groups.setdefault(id(output), (output, []))[1].append(index)
        for output, indexes in groups.values():
            _send_group(output, messages, indexes, failures)
        if failures:
            raise SendError(failures)

    def flush(self) -> None:
        for output in self._all():
            output.flush()

    def status(self) -> EndpointStatus:
        statuses = [output.status() for output in self._all()]
        return EndpointStatus(
            healthy=all(s.healthy for s in statuses),
            target=self.describe(),
            details={"cases": sorted(self._cases)},
        )

    def describe(self) -> str:
        return f"switch({self._key})"

    def close(self) -> None:
        for output in self._all():
            output.close()


def _send_group(
    output: OutputEndpoint,
    messages: Sequence[Message],
    indexes: list[int],
    failures: dict[int, BaseException],
) -> None:
    try:
        output.send([messages[i] for i in indexes])
    except SendError as error:
        for position, cause in error.failures.items():
            failures[indexes[position]] = cause
    except Exception as error:
        for index in indexes:
            failures[index] = error


def build_output(options: Mapping[str, Any], context: BuildContext) -> SwitchOutput:
    key = options.get("metadata_key") or ""
    if options.get("cases") and not key:
        raise ConfigError("`cases` needs `metadata_key`", path="switch.metadata_key")
    if not options.get("cases") and not options.get("when"):
        raise ConfigError("needs `when` or `metadata_key` with `cases`", path="switch")
    build = context.build_output
    if build is None:
        raise ConfigError("switch needs the runtime's endpoint builder", path="switch")
    when = [
        (compile_predicate(case["if"], f"switch.when[{i}].if"), build(case["to"]))
        for i, case in enumerate(options.get("when") or [])
    ]
    cases = {str(value): build(config) for value, config in (options.get("cases") or {}).items()}
    default = build(options["default"]) if options.get("default") else None
    return SwitchOutput(key, cases, default, when)
