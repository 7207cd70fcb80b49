"""Running the command line in tests: in this process (fast) or as a real child process."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mq_bridge.cli import main

REPOSITORY = Path(__file__).resolve().parents[3]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``mq-bridge ARGS`` in this process: (exit code, stdout, stderr).

    The command sets up the ``mq_bridge`` logger as a process would; it is put back
    afterwards so that other tests see logging as they left it."""
    with bridge_logging_restored():
        try:
            code = main(list(args))
        except SystemExit as exit:  # argparse usage errors and --version
            code = int(exit.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@contextmanager
def bridge_logging_restored() -> Iterator[None]:
    """Put the ``mq_bridge`` logger's level and handlers back after a command set them (a
    level left at WARNING hides the DEBUG records later tests look for)."""
    logger = logging.getLogger("mq_bridge")
    level, handlers = logger.level, list(logger.handlers)
    try:
        yield
    finally:
        logger.setLevel(level)
        logger.handlers[:] = handlers


def spawn(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``python -m mq_bridge ARGS`` as a child process (stdout/stderr piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mq_bridge", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_child(
    *args: str, cwd: Path, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m mq_bridge ARGS`` to completion (with `stdin` as its input)."""
    return subprocess.run(
        [sys.executable, "-m", "mq_bridge", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write_json_lines(path: Path, values: list[Any]) -> None:
    path.write_text("".join(json.dumps(value) + "\n" for value in values), encoding="utf-8")


def read_json_lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
