"""Contract cases on real brokers: one call adds a broker endpoint to the contract suite.

A broker endpoint writes a function that builds its case from the broker's address, in a
fresh, uniquely named place, and returns a `cleanup` that deletes that place; then one line in
cases.py adds it (the markers' names: kafka nats amqp mqtt redis postgres mysql mongodb sqs)::

    def nats_case(url: str) -> ContractCase:
        stream = f"contract-{uuid.uuid4().hex[:8]}"
        config = {"nats": {"url": url, "stream": stream, "max_bytes": 1 << 20}}
        return ContractCase(config, config, cleanup=lambda: delete_stream(url, stream))

    CASES["nats"], MARKS["nats"] = broker_case("nats", pytest.mark.nats, nats_case)

Before the case is built, `tests.brokers.require_broker` checks that the broker answers: when
it does not, the test is skipped with a reason that says how to start it, and fails under
``CI=true``. The marker lets ``-m "not nats"`` deselect the case. The contract conftest runs
`cleanup` after each test, even a failed one, because the brokers are shared by every test run
on the machine (shared/BROKERS.md) and a leftover JetStream stream takes storage from all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.brokers import canonical_name, require_broker

if TYPE_CHECKING:  # cases.py imports this module, so not the other way round at run time
    from tests.mq_bridge.contract.cases import ContractCase

CaseFactory = Callable[[Path], "ContractCase"]


def broker_case(
    broker: str, marker: pytest.MarkDecorator, make: Callable[[str], ContractCase]
) -> tuple[CaseFactory, list[pytest.MarkDecorator]]:
    """The entries for `CASES` and `MARKS` of a case that needs the broker `broker`.

    `broker` is a name of `tests.brokers.BROKERS` (or a marker's name: amqp, mqtt, mysql);
    `make` gets the broker's address (e.g. ``nats://127.0.0.1:4222``) and builds the case.
    """
    canonical_name(broker)  # an unknown name fails at import, not in every test

    def factory(tmp_path: Path) -> ContractCase:
        return make(require_broker(broker))

    factory.__name__ = factory.__qualname__ = f"{broker}_case"
    maker = getattr(make, "__name__", repr(make))
    factory.__doc__ = f"`{maker}` on {broker}, once it answers (else skip; under CI: fail)."
    return factory, [marker]
