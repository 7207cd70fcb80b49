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
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests import peers
from tests.compat.divergences import DIVERGENCES

ROOT = Path(__file__).resolve().parents[2]
OBSERVE = Path(__file__).with_name("observe.py")


#: Scenarios (and, where not all, their keys) that observe what both peers do alike: they are
#: compared with mq-bridge 1.2.0 too (`test_what_both_peers_do_alike_agrees_with_1_2_0_too`).
SHARED_WITH_1_2_0: dict[str, list[str] | None] = {
    "route_handlers_while_running": None,
    "route_handler_precedence": None,
    "route_handlers": None,
    "route_correlation": None,
    "publisher_metadata_beside_a_message": None,
    "route_from_a_one_route_document": None,
    "cookie_jar": None,
    "cookie_jar_in_memory": None,
    "schema_shape": ["root type"],
}


def _observe(
    python: str,
    *,
    peer: bool = False,
    names: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    environment = peers.peer_environment() if peer else dict(os.environ)
    done = subprocess.run(
        [python, str(OBSERVE), *(names or [])],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tempfile.gettempdir(),  # not the repository: its src/ must not shadow the peer
        env={**environment, **(env or {})},
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


def _unexplained(
    ours: dict[str, Any], peer: dict[str, Any], keys: list[tuple[str, str]]
) -> list[str]:
    """Each key whose observations disagree without a listed divergence that still holds."""
    unexplained = []
    for scenario, key in keys:
        mine, theirs = ours[scenario].get(key), peer[scenario].get(key)
        if _agree(mine, theirs):
            continue
        listed = DIVERGENCES.get((scenario, key))
        if listed is None:
            unexplained.append(f"{scenario} / {key}:\n    ours: {mine}\n    peer: {theirs}")
        elif listed[1] is not None and not listed[1](mine, theirs):
            unexplained.append(f"{scenario} / {key} ({listed[0]}) no longer holds: {mine}")
    return unexplained


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
    unexplained = _unexplained(ours, peer, _keys(observations))
    assert not unexplained, "\n".join(unexplained)


def test_what_both_peers_do_alike_agrees_with_1_2_0_too(observations) -> None:
    """The behaviours mq-bridge 1.2.0 shares with 0.3.2 (SHARED_WITH_1_2_0), observed in
    1.2.0's own venv: the same agreement, the same listed divergences."""
    ours, _ = observations
    successor = _observe(peers.peer_python("mq-bridge"), peer=True, names=list(SHARED_WITH_1_2_0))
    keys = [
        (scenario, key)
        for scenario, chosen in SHARED_WITH_1_2_0.items()
        for key in (chosen or sorted(set(ours[scenario]) | set(successor[scenario])))
    ]
    unexplained = _unexplained(ours, successor, keys)
    assert not unexplained, "\n".join(unexplained)


@pytest.mark.amqp
def test_amqp_broadcast_agrees_with_both_peers(amqp_url: str) -> None:
    """The seed's broadcast mode on the real RabbitMQ: three subscribers of a subscribe_mode
    config and a publisher of the same config, in ours, 0.3.2 and 1.2.0; every subscriber
    gets every message in each. The exchange (named after `queue`) is deleted afterwards,
    and the durable queue our publisher used to declare too, should it come back."""
    from tests.mq_bridge.endpoints.test_amqp import delete_exchange, delete_queue

    pythons = {
        "ours": (sys.executable, False),
        "0.3.2": (peers.peer_python("mq-bridge-py"), True),
        "1.2.0": (peers.peer_python("mq-bridge"), True),
    }
    received = {}
    for side, (python, peer) in pythons.items():
        name = f"compat-broadcast-{uuid.uuid4().hex[:8]}"
        environment = {
            "MQB_COMPAT_AMQP_URL": amqp_url.rstrip("/") + "/%2f",  # lapin: name vhost "/"
            "MQB_COMPAT_AMQP_NAME": name,
        }
        try:
            found = _observe(python, peer=peer, names=["amqp_broadcast"], env=environment)
            received[side] = found["amqp_broadcast"]
        finally:
            delete_exchange(amqp_url, name)
            delete_queue(amqp_url, name)
    assert received["ours"] == received["0.3.2"] == received["1.2.0"], received
    assert received["ours"] == {"each subscriber received": [["m0", "m1", "m2"]] * 3}


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
