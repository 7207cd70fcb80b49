"""After ``pip install -e .`` (no extras) the commands that need one name it.

Each command runs in a child process in which the optional packages cannot be imported, as
in a venv without them: a finder placed first on ``sys.meta_path`` refuses them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.mq_bridge.cli.helpers import REPOSITORY

WITHOUT = """
import sys
from importlib.abc import MetaPathFinder

BLOCKED = set(sys.argv[1].split(","))


class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
from mq_bridge.cli import main

sys.exit(main(sys.argv[2:]))
"""

OPTIONAL = "aiohttp,prometheus_client,opentelemetry"


def without_extras(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT, OPTIONAL, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "in.jsonl").write_text('{"n": 1}\n')
    path = tmp_path / "bridge.yaml"
    path.write_text(
        f"input: {{file: {{path: {tmp_path}/in.jsonl, format: raw}}}}\n"
        f"output: {{file: {{path: {tmp_path}/out.jsonl, format: raw}}}}\n"
    )
    return path


CONSOLE = (
    "mq-bridge: error: the console needs the aiohttp package: pip install 'twainmq[console]'\n"
)
METRICS = (
    "mq-bridge: error: metrics: /metrics needs the prometheus-client package: "
    "pip install 'twainmq[metrics]'\n"
)
TRACING = "mq-bridge: error: tracing: tracing needs OpenTelemetry: pip install 'twainmq[otel]'\n"


def test_the_console_names_its_extra(tmp_path: Path) -> None:
    done = without_extras("console", "--root", str(tmp_path), "--port", "0", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, CONSOLE)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--metrics-port", "0"], METRICS),
        (["--console-port", "0"], CONSOLE),
        (["--tracing"], TRACING),
    ],
    ids=["metrics", "console", "tracing"],
)
def test_run_names_the_extra_of_each_observability_option(
    config: Path, options: list[str], error: str
) -> None:
    done = without_extras(
        "run", str(config), "-q", "--stop-when-idle", "0.1", *options, cwd=config.parent
    )
    assert (done.returncode, done.stderr) == (1, error)
    assert not (config.parent / "out.jsonl").exists()  # nothing ran


def test_the_blocker_blocks_only_what_it_names(config: Path) -> None:
    """The same child process runs the route when no option needs an extra."""
    done = without_extras("run", str(config), "-q", cwd=REPOSITORY)
    assert (done.returncode, done.stderr) == (0, "")
    assert (config.parent / "out.jsonl").read_text() == '{"n": 1}\n'
