"""``twainmq produce`` stopped by Ctrl-C or SIGTERM says what it wrote; ``--version``."""

from __future__ import annotations

import importlib.metadata
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from twainmq import Twain


def written(root: Path, topic: str) -> int:
    consumer = Twain(str(root)).consumer(topic)
    try:
        count = 0
        while consumer.poll(timeout=0) is not None:
            count += 1
        return count
    finally:
        consumer.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_produce_says_how_many_lines_it_wrote_and_exits_130(
    tmp_path: Path, signum: signal.Signals
) -> None:
    Twain(str(tmp_path)).create_topic("t", partitions=2)
    child = subprocess.Popen(
        [sys.executable, "-m", "twainmq", "--root", str(tmp_path), "produce", "t"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdin is not None
        child.stdin.write("one\ntwo\nthree\n")
        child.stdin.flush()  # stdin stays open: produce waits for more lines
        deadline = time.monotonic() + 60
        while written(tmp_path, "t") < 3:
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.05)
        child.send_signal(signum)
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert err == "twainmq: interrupted: lines 1..3 were written to 't', nothing after them\n"
    assert out == ""


def test_version_is_the_installed_distributions():
    version = importlib.metadata.version("twainmq")
    for command in ("twainmq", "mq_bridge"):
        done = subprocess.run(
            [sys.executable, "-m", command, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout) == (0, f"{command.replace('_', '-')} {version}\n")
