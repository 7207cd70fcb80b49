"""The peer libraries, each in its own venv (`scripts/peer-venv.sh`), for interop and compat.

    peer_python("mq-bridge")          # the python of mq-bridge 1.2.0's venv, made on first use
    run_peer(python, SCRIPT, *args)   # run SCRIPT there; its stdout, or a failure with stderr

Without a venv (no registry), a test skips with the reason — but under ``CI=true`` it fails:
CI makes the venvs. The peer runs with a clean environment: no ``PYTHONPATH`` (which could
point at our own `mq_bridge` and shadow the peer's), no ``MQB_SOURCE_METADATA``, and in a
temporary directory rather than the repository (whose `src/` must not be importable there).

`tests/conftest.py` offers `mq_bridge_peer`, the 1.2.0 python, as a session fixture.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import pytest

from tests.brokers import in_ci

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["peer_environment", "peer_python", "run_peer"]


def peer_python(name: str) -> str:
    """The python of peer `name`'s venv (`scripts/peer-venv.sh NAME`); skip/fail without it."""
    try:
        return _made(name)
    except (OSError, subprocess.SubprocessError) as error:
        reason = f"the {name} peer venv could not be made (scripts/peer-venv.sh {name}): {error}"
        if in_ci():
            pytest.fail(f"{reason} [CI=true: the peer must run]", pytrace=False)
        pytest.skip(reason)


@cache
def _made(name: str) -> str:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "peer-venv.sh"), name],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def peer_environment() -> dict[str, str]:
    """This process's environment without what would change what the peer imports or adds."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "MQB_SOURCE_METADATA")
    }


def run_peer(python: str, script: str, *args: str, timeout: float = 120) -> str:
    """Run `script` (Python source) under the peer's `python` with `args`; its stdout."""
    with tempfile.TemporaryDirectory() as directory:
        done = subprocess.run(
            [python, "-c", script, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=directory,
            env=peer_environment(),
        )
    assert done.returncode == 0, f"the peer failed:\n{done.stderr[-3000:]}"
    return done.stdout
