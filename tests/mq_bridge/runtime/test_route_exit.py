"""A route still running when the interpreter exits is stopped and closes its endpoints."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import mq_bridge
    from mq_bridge import Route

    marker = sys.argv[1]

    class Sink:
        def __init__(self, route, config):
            pass

        def send_batch(self, messages):
            pass

        def close(self):
            time.sleep(0.2)  # a driver's close takes a while (a commit, a flush)
            with open(marker, "w") as file:
                file.write("closed")

    mq_bridge.register_endpoint("exit_sink", Sink)
    route = Route.from_config({"input": {"memory": {"topic": "t"}}, "output": {"exit_sink": {}}})
    route.start()
    if sys.argv[2] == "stopped":
        route.stop()  # and no join(): the program ends at once
    """
)


@pytest.mark.parametrize("how", ["running", "stopped"])
def test_exit_closes_the_endpoints_of_a_route_left_running(tmp_path: Path, how: str) -> None:
    marker = tmp_path / "closed"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(marker), how],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "closed"
