"""The `case` fixture: every contract test runs once per endpoint in `cases.CASES`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mq_bridge.contract.cases import CASES, MARKS, ContractCase


@pytest.fixture(params=[pytest.param(name, marks=MARKS.get(name, [])) for name in CASES])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> ContractCase:
    built = CASES[request.param](tmp_path)
    if built.cleanup is not None:
        request.addfinalizer(built.cleanup)
    return built
