"""switch: routes each message to one of several outputs, by predicate or metadata value.

Features
    - Predicate mode: `when` is an ordered list of ``{if: <expression>, to: <endpoint>}``;
      the first expression that holds picks the output (expressions: see `predicates`,
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

from collections.abc import Sequence

from pydantic import ConfigDict, Field, model_validator

from mq_bridge.config.declarations import EndpointRef, OptionError, Options
from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.switch.predicates import Predicate, compile_predicate
from mq_bridge.errors import ConfigError, NonRetryableError, SendError
from mq_bridge.message import Message

__all__ = ["OPTIONS", "SwitchOptions", "SwitchOutput", "WhenCase", "build_output"]


class WhenCase(Options):
    """One condition and the output its messages go to."""

    model_config = ConfigDict(populate_by_name=True)

    condition: str = Field(alias="if", description="e.g. amount > 100")
    to: EndpointRef = Field(description="The output for messages that match.")


class SwitchOptions(Options):
    """Sends each message to the output its metadata or payload selects."""

    metadata_key: str = Field("", description="The metadata key whose value picks a case.")
    cases: dict[str, EndpointRef] = Field(
        default_factory=dict, description="Outputs by metadata value (needs metadata_key)."
    )
    when: list[WhenCase] = Field(
        default_factory=list, description="Conditions tried in order; the first match wins."
    )
    default: EndpointRef | None = Field(None, description="The output when nothing matches.")

    @model_validator(mode="after")
    def _routes_somewhere(self) -> SwitchOptions:
        if self.cases and not self.metadata_key:
            raise OptionError("metadata_key", "`cases` needs `metadata_key`")
        if not self.cases and not self.when:
            raise ValueError("needs `when` or `metadata_key` with `cases`")
        return self


OPTIONS = SwitchOptions


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


def build_output(options: SwitchOptions, context: BuildContext) -> SwitchOutput:
    build = context.build_output
    if build is None:
        raise ConfigError("switch needs the runtime's endpoint builder", path="switch")
    when = [
        (compile_predicate(case.condition, f"switch.when[{i}].if"), build(case.to))
        for i, case in enumerate(options.when)
    ]
    cases = {value: build(config) for value, config in options.cases.items()}
    default = build(options.default) if options.default else None
    return SwitchOutput(options.metadata_key, cases, default, when)
