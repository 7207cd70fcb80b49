"""What the plain ``pytest`` runs: outside CI the slow and faults tests are left out.

tests/conftest.py turns pyproject's ``-m 'not performance'`` into ``-m 'not performance and
not slow and not faults'`` unless ``CI=true`` or the command line gives its own ``-m``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SLOW = "tests/twainmq/test_processes.py::test_kill_9_mid_stream_loses_no_acknowledged_write"
QUICK = "tests/twainmq/test_processes.py::test_an_exclusive_producer_makes_other_processes_wait"
FAULTS = "tests/faults/test_poison.py"  # marked faults only, not slow


def pytest_child(*args: str, ci: str | None = None) -> str:
    """The output of ``pytest --collect-only ARGS`` in a child process (CI=`ci`, or unset)."""
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "PYTEST_ADDOPTS")}
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: everything deselected
    return done.stdout


def collected(*args: str, ci: str | None = None) -> set[str]:
    """The ids (without parameters) pytest would run."""
    out = pytest_child("-q", *args, ci=ci)
    return {line.split("[")[0] for line in out.splitlines() if "::" in line}


def test_outside_ci_the_plain_run_leaves_out_slow_and_faults_tests_and_says_so() -> None:
    ids = collected("tests/twainmq/test_processes.py", FAULTS)
    assert QUICK in ids
    assert SLOW not in ids
    assert not any(test.startswith(FAULTS) for test in ids)
    header = pytest_child(QUICK)
    assert "outside CI: -m 'not performance and not slow and not faults'" in header
    assert "-m slow" in header


@pytest.mark.parametrize("ci", ["true", "TRUE"])
def test_under_ci_everything_runs(ci: str) -> None:
    ids = collected("tests/twainmq/test_processes.py", FAULTS, ci=ci)
    assert {QUICK, SLOW} <= ids
    assert any(test.startswith(FAULTS) for test in ids)


def test_an_explicit_marker_expression_wins() -> None:
    slow = collected("tests/twainmq/test_processes.py", FAULTS, "-m", "slow")
    assert SLOW in slow and QUICK not in slow and not any(t.startswith(FAULTS) for t in slow)
    everything = collected("tests/twainmq/test_processes.py", FAULTS, "-m", "not performance")
    assert {QUICK, SLOW} <= everything and any(t.startswith(FAULTS) for t in everything)


def test_ci_runs_the_plain_pytest_under_ci_true() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert script.index("export CI=true") < script.index("python -m pytest")
