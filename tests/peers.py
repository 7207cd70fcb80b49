"""The peer libraries, each in its own venv (`scripts/peer-venv.sh`), for interop and compat.

    peer_python("mq-bridge")          # the python of mq-bridge 1.2.0's venv, made on first use
    run_peer(python, SCRIPT, *args)   # run SCRIPT there; its stdout, or a failure with stderr
    run_peer(python, CLIENT_SCRIPT, "publish", CONFIG_JSON, json.dumps(as_wire(messages)))
    run_peer(python, CLIENT_SCRIPT, "consume", CONFIG_JSON, "3")  # a JSON list, as_wire's shape

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
from typing import TYPE_CHECKING, Any

import pytest

from tests.brokers import in_ci

if TYPE_CHECKING:
    from mq_bridge import Message

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["CLIENT_SCRIPT", "as_wire", "peer_environment", "peer_python", "run_peer"]


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


# The peer as a plain client of any broker endpoint: it publishes the messages given in
# `as_wire`'s shape, or consumes (and commits) up to a count and prints them in that shape.
CLIENT_SCRIPT = r"""
import json, sys
from mq_bridge import Consumer, Message, Publisher
mode, config = sys.argv[1], json.loads(sys.argv[2])
if mode == "publish":
    publisher = Publisher.from_config(config)  # 1.2.0's is no context manager
    for item in json.loads(sys.argv[3]):
        message = Message(bytes.fromhex(item["payload"]), item["metadata"], id=item["id"])
        publisher.send(message)
else:
    got = []
    with Consumer.from_config(config) as consumer:
        for _ in range(50):
            batch = consumer.poll(max=10, timeout_ms=200)
            got += [{"payload": m.payload.hex(), "id": str(m.id), "metadata": dict(m.metadata)}
                    for m in batch]
            consumer.commit()
            if len(got) >= int(sys.argv[3]):
                break
    print(json.dumps(got))
"""


def as_wire(messages: list[Message]) -> list[dict[str, Any]]:
    """`messages` as `CLIENT_SCRIPT` takes and prints them: hex payload, id, metadata."""
    return [
        {"payload": m.payload.hex(), "id": m.assigned_id(), "metadata": m.metadata}
        for m in messages
    ]
