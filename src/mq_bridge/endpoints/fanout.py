"""fanout: sends every message to each of a list of outputs.

Features
    - Outputs receive the batch one after another, in list order; each output may carry
      its own `middlewares`.
    - A message fails when it failed on any output; it is then retried on all of them, so
      an output that already took it may see it twice (at-least-once, like every retry).

Options
    a list of endpoint configs, e.g. ``[{memory: {topic: a}}, {file: {path: out.jsonl}}]``
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field, RootModel

from mq_bridge.config.declarations import EndpointRef
from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.errors import ConfigError, SendError
from mq_bridge.message import Message

__all__ = ["OPTIONS", "FanoutOptions", "FanoutOutput", "build_output"]


class FanoutOptions(RootModel[Annotated[list[EndpointRef], Field(min_length=1)]]):
    """The outputs that each receive a copy of every batch."""


OPTIONS = FanoutOptions


class FanoutOutput(OutputEndpoint):
    """Copies each batch to every output."""

    def __init__(self, outputs: list[OutputEndpoint]) -> None:
        self._outputs = outputs

    def connect(self) -> None:
        for output in self._outputs:
            output.connect()

    def send(self, messages: Sequence[Message]) -> None:
        failures: dict[int, BaseException] = {}
        for output in self._outputs:
            try:
                output.send(messages)
            except SendError as error:
                for index, cause in error.failures.items():
                    failures.setdefault(index, cause)
            except Exception as error:
                for index in range(len(messages)):
                    failures.setdefault(index, error)
        if failures:
            raise SendError(failures)

    def flush(self) -> None:
        for output in self._outputs:
            output.flush()

    def status(self) -> EndpointStatus:
        statuses = [output.status() for output in self._outputs]
        errors = [s.error for s in statuses if s.error]
        return EndpointStatus(
            healthy=all(s.healthy for s in statuses),
            target=self.describe(),
            error="; ".join(errors) or None,
            details={"outputs": [s.as_dict() for s in statuses]},
        )

    def describe(self) -> str:
        return "fanout[" + ", ".join(o.describe() for o in self._outputs) + "]"

    def close(self) -> None:
        for output in self._outputs:
            output.close()


def build_output(options: FanoutOptions, context: BuildContext) -> FanoutOutput:
    if context.build_output is None:
        raise ConfigError("fanout needs the runtime's endpoint builder", path="fanout")
    return FanoutOutput([context.build_output(config) for config in options.root])
