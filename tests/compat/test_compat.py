"""Our `mq_bridge` against the real mq-bridge-py 0.3.2: what a user observes must agree.

The scenarios (`scenarios.py`) run once in each interpreter — ours, and the peer's own venv
made by `scripts/peer-venv.sh mq-bridge-py` from PyPI — and every observation is compared.
An error agrees when ours is an instance of every built-in class the peer's was (so
``except RuntimeError:`` still catches it). Every deliberate difference is listed in
`divergences.py` and explained in docs/compat.md.

Without the peer's venv (no network), the suite skips — but under ``CI=true`` it fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests import peers
from tests.compat.divergences import DIVERGENCES

ROOT = Path(__file__).resolve().parents[2]
OBSERVE = Path(__file__).with_name("observe.py")


def _observe(python: str, *, peer: bool = False) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [python, str(OBSERVE)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tempfile.gettempdir(),  # not the repository: its src/ must not shadow the peer
        env=peers.peer_environment() if peer else None,
    )
    assert done.returncode == 0, f"{python} observe.py failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def observations() -> tuple[dict[str, Any], dict[str, Any]]:
    return _observe(sys.executable), _observe(peers.peer_python("mq-bridge-py"), peer=True)


def _agree(ours: Any, peer: Any) -> bool:
    if ours == peer:
        return True
    if isinstance(ours, dict) and isinstance(peer, dict) and "raises" in ours and "raises" in peer:
        return set(peer["raises"]) <= set(ours["raises"])
    return False


def _keys(observations: tuple[dict[str, Any], dict[str, Any]]) -> list[tuple[str, str]]:
    ours, peer = observations
    return sorted({(s, k) for side in (ours, peer) for s, found in side.items() for k in found})


def test_every_scenario_ran_in_both(observations) -> None:
    ours, peer = observations
    assert sorted(ours) == sorted(peer)
    crashed = [
        (side, name)
        for side, found in (("ours", ours), ("peer", peer))
        for name, result in found.items()
        if "scenario crashed" in result
    ]
    assert not crashed, crashed


def test_what_a_user_observes_agrees_or_is_a_listed_divergence(observations) -> None:
    ours, peer = observations
    unexplained = []
    for scenario, key in _keys(observations):
        mine, theirs = ours[scenario].get(key), peer[scenario].get(key)
        if _agree(mine, theirs):
            continue
        listed = DIVERGENCES.get((scenario, key))
        if listed is None:
            unexplained.append(f"{scenario} / {key}:\n    ours: {mine}\n    peer: {theirs}")
        elif listed[1] is not None and not listed[1](mine, theirs):
            unexplained.append(f"{scenario} / {key} ({listed[0]}) no longer holds: {mine}")
    assert not unexplained, "\n".join(unexplained)


def test_every_listed_divergence_still_differs(observations) -> None:
    ours, peer = observations
    stale = [
        f"{scenario} / {key}"
        for scenario, key in DIVERGENCES
        if _agree(ours[scenario].get(key), peer[scenario].get(key))
    ]
    assert not stale, f"these agree now: remove them from divergences.py and compat.md: {stale}"


def test_every_divergence_is_explained_in_the_docs() -> None:
    text = (ROOT / "docs" / "compat.md").read_text()
    missing = [f"{s} / {k}" for s, k in DIVERGENCES if f"`{s} / {k}`" not in text]
    assert not missing, missing
