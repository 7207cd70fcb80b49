"""switch: routes each message to one of several outputs by a metadata value.

Features
    - Value-lookup mode: the value of metadata `metadata_key` picks the output in `cases`;
      messages with no matching case go to `default`, and fail (not retriable: dead-lettered
      or logged and dropped) when there is no default.
    - Each output may carry its own `middlewares`; a batch is split per output, keeping order.
    - Predicate mode (`when`) is not supported yet: a config using it is rejected.

Options
    metadata_key   the metadata key whose value picks the case (required)
    cases          map of metadata value -> endpoint config
    default        endpoint config for everything else (optional)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.errors import ConfigError, NonRetryableError, SendError
from mq_bridge.message import Message

__all__ = ["SCHEMA", "SwitchOutput", "build_output"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metadata_key": {"type": "string", "default": ""},
        "cases": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Endpoint"}},
        "when": {"type": "array", "items": {"type": "object"}, "default": []},
        "default": {"anyOf": [{"$ref": "#/$defs/Endpoint"}, {"type": "null"}]},
    },
    "additionalProperties": False,
}


class SwitchOutput(OutputEndpoint):
    """Sends each message to the output its metadata value selects."""

    def __init__(
        self, key: str, cases: dict[str, OutputEndpoint], default: OutputEndpoint | None
    ) -> None:
        self._key = key
        self._cases = cases
        self._default = default

    def _all(self) -> list[OutputEndpoint]:
        return [*self._cases.values(), *([self._default] if self._default else [])]

    def connect(self) -> None:
        for output in self._all():
            output.connect()

    def send(self, messages: Sequence[Message]) -> None:
        groups: dict[int, tuple[OutputEndpoint, list[int]]] = {}
        failures: dict[int, BaseException] = {}
        for index, message in enumerate(messages):
            value = message.get(self._key)
            output = self._cases.get(value, self._default) if value is not None else self._default
            if output is None:
                failures[index] = NonRetryableError(
                    f"switch: no case for {self._key}={value!r} and no default"
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
    if options.get("when"):
        raise ConfigError("predicate mode is not supported yet; use metadata_key", "switch.when")
    key = options.get("metadata_key") or ""
    if not key:
        raise ConfigError("needs `metadata_key`", path="switch.metadata_key")
    build = context.build_output
    if build is None:
        raise ConfigError("switch needs the runtime's endpoint builder", path="switch")
    cases = {str(value): build(config) for value, config in (options.get("cases") or {}).items()}
    default = build(options["default"]) if options.get("default") else None
    return SwitchOutput(key, cases, default)
