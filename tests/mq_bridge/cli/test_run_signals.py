"""``mq-bridge run`` in a real child process: SIGTERM/SIGINT stop it cleanly (exit 0).

A clean stop finishes and commits the batch in flight, so a second run resumes exactly
after it: every message comes out once, none lost, none twice.
"""

from __future__ import annotations

import json
import signal
import textwrap
import time
from pathlib import Path

import pytest

from tests.mq_bridge.cli.helpers import run_child, spawn

COUNT = 3000

CONFIG = """\
routes:
  enrich:
    batch_size: 100
    input:
      twain: {{root: {root}, topic: orders, group: enrich, create: {{partitions: 4}}}}
    output:
      file: {{path: {output}, format: raw}}
"""

SLOW_HANDLER = """\
import time

def enrich(message):
    time.sleep(0.001)
    order = message.json()
    return {"n": order["n"], "seen": True}
"""


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_stops_cleanly_and_a_rerun_resumes(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    output = tmp_path / "out.jsonl"
    config = tmp_path / "pipeline.yaml"
    config.write_text(CONFIG.format(root=tmp_path / "store", output=output))
    (tmp_path / "handlers.py").write_text(textwrap.dedent(SLOW_HANDLER))
    orders = "\n".join(f'{{"n": {n}}}' for n in range(COUNT))
    sent = run_child(
        "send", "pipeline.yaml", "--route", "enrich", "--json", cwd=tmp_path, stdin=orders
    )
    assert sent.returncode == 0, sent.stderr

    child = spawn("run", "pipeline.yaml", "--handler", "handlers:enrich", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while len(_lines(output)) < 300 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    child.send_signal(stop_signal)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert f"{stop_signal.name}: finishing the messages in flight" in err
    assert "stopped: stopped by a signal" in err
    first_run = len(_lines(output))
    assert 300 <= first_run < COUNT, "stop earlier: the test needs messages left for the rerun"
    assert f"route enrich: {first_run:,} messages" in out

    rerun = run_child(
        "run",
        "pipeline.yaml",
        "--handler",
        "handlers:enrich",
        "--stop-when-idle",
        "1",
        cwd=tmp_path,
    )
    assert rerun.returncode == 0, rerun.stderr
    numbers = sorted(json.loads(line)["n"] for line in _lines(output))
    assert numbers == list(range(COUNT))  # all there, and none twice


STUCK_HANDLER = """\
import pathlib, time

def stuck(message):
    pathlib.Path("handling").touch()
    time.sleep(60)
    return message
"""


@pytest.mark.slow
@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_second_signal_quits_at_once(tmp_path: Path, second: signal.Signals) -> None:
    """The handler sleeps in its batch; the first SIGTERM waits for it, the second does not:
    exit 130 within a second or two, not after the routes' ten-second exit grace."""
    config = tmp_path / "pipeline.yaml"
    config.write_text(CONFIG.format(root=tmp_path / "store", output=tmp_path / "out.jsonl"))
    (tmp_path / "handlers.py").write_text(STUCK_HANDLER)
    assert (
        run_child("send", "pipeline.yaml", "--route", "enrich", "x", cwd=tmp_path).returncode == 0
    )
    child = spawn("run", "pipeline.yaml", "--handler", "handlers:stuck", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not (tmp_path / "handling").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)  # asks to finish the message in flight: it never will
    time.sleep(0.5)
    assert child.poll() is None
    sent_at = time.monotonic()
    child.send_signal(second)
    _, err = child.communicate(timeout=30)
    took = time.monotonic() - sent_at
    assert child.returncode == 130, err
    assert took < 2.0, f"the second signal took {took:.1f} s to end the process"
    assert f"{second.name} again: quitting now" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out.jsonl").exists() or (tmp_path / "out.jsonl").read_text() == ""
