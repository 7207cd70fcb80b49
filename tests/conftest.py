"""Shared test configuration.

Outside CI the plain ``pytest`` leaves out the long crash/stress tests (``slow``) and the fault
suite (``faults``, tests/faults/), so that a newcomer's first run takes minutes, not most of
an hour. Under ``CI=true`` nothing is left out, and an explicit ``-m`` always wins:
``pytest -m slow`` runs the long ones, ``pytest -m 'not performance'`` runs what CI runs.
"""

from __future__ import annotations

import os
import shlex

import pytest
from hypothesis import settings

# The real-broker fixtures (kafka_bootstrap, nats_url, ...) and helpers, for every test.
pytest_plugins = ["tests.brokers"]

# Property tests check properties, not speed: on a loaded 2-core machine Hypothesis's default
# 200 ms deadline per example fails them for reasons that have nothing to do with the code.
settings.register_profile("project", deadline=None)
settings.load_profile("project")

#: pyproject's addopts gives this -m.
DEFAULT_MARKEXPR = "not performance"
#: What the plain run leaves out outside CI.
LONG_MARKERS = ("slow", "faults")
LOCAL_MARKEXPR = " and ".join([DEFAULT_MARKEXPR, *(f"not {name}" for name in LONG_MARKERS)])
long_tests_left_out = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    from tests.brokers import in_ci  # here, not at the top: pytest_plugins imports it first

    if not in_ci() and not marker_expression_given(config):
        config.option.markexpr = LOCAL_MARKEXPR
        config.stash[long_tests_left_out] = True


def marker_expression_given(config: pytest.Config) -> bool:
    """Whether the command line (or $PYTEST_ADDOPTS) has a ``-m``: pyproject's is not one."""
    args = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    return any(arg.startswith("-m") for arg in map(str, args))


def pytest_report_header(config: pytest.Config) -> str | None:
    if not config.stash.get(long_tests_left_out, False):
        return None
    return (
        f"outside CI: -m '{LOCAL_MARKEXPR}' (the slow and faults tests; "
        "run them with -m slow, -m faults, or everything as CI does with -m 'not performance')"
    )
