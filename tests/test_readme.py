"""Every ``python`` and ``bash`` block of README.md runs, twice in a row, as a reader would.

Each block runs in a fresh temporary directory (with ``examples/`` linked in, as in a
checkout) and runs a second time in the same directory: a snippet that only works once
(``TopicExistsError``, a group the previous snippet made) fails here. Absolute ``/tmp/``
paths in a block are redirected into the temporary directory, so runs do not share state
with each other or with the machine. Blocks that install packages or need the peers are
skipped, each with its reason below.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
README = REPOSITORY / "README.md"

#: A text found in the block -> why that block is not run here.
SKIPPED = {
    "pip install -e . && mq-bridge demo": "installs the package (CI's fresh venv does that)",
}

_BLOCK = re.compile(r"^```(python|bash)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_TIMEOUT_SECONDS = 120


def _blocks() -> list[tuple[str, str, str]]:
    """(id, language, code) for every python/bash block, in order."""
    found = _BLOCK.findall(README.read_text(encoding="utf-8"))
    return [(f"{language}-{n}", language, code) for n, (language, code) in enumerate(found, 1)]


def _reason_to_skip(code: str) -> str | None:
    return next((reason for text, reason in SKIPPED.items() if text in code), None)


def test_every_skip_reason_names_a_block() -> None:
    codes = [code for _, _, code in _blocks()]
    assert [text for text in SKIPPED if not any(text in code for code in codes)] == []


@pytest.mark.parametrize(
    ("language", "code"), [block[1:] for block in _blocks()], ids=[block[0] for block in _blocks()]
)
def test_readme_block_runs_twice(language: str, code: str, tmp_path: Path) -> None:
    reason = _reason_to_skip(code)
    if reason:
        pytest.skip(reason)
    (tmp_path / "examples").symlink_to(REPOSITORY / "examples")
    code = code.replace("/tmp/", f"{tmp_path}/")
    # bash -e -o pipefail: a failing line fails the block, as it would stop a reader
    bash = ["bash", "-e", "-o", "pipefail", "-c", code]
    command = [sys.executable, "-c", code] if language == "python" else bash
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TMPDIR": str(tmp_path),  # the demos' fresh stores
    }
    env.pop("TWAINMQ_ROOT", None)
    for attempt in ("first", "second"):
        result = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=_TIMEOUT_SECONDS,
        )  # fmt: skip
        assert result.returncode == 0, f"{attempt} run failed:\n{result.stderr}"
        assert "Traceback" not in result.stderr


_YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("text", _YAML_BLOCK.findall(README.read_text(encoding="utf-8")))
def test_readme_configs_are_valid(text: str) -> None:
    """A config shown in the README passes `validate` (it is not run: it may name brokers)."""
    from mq_bridge.config.loader import validate_document

    assert validate_document(("str", text)) == []
