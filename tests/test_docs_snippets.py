"""Every ``python`` and ``bash`` block of docs/**/*.md runs, twice in a row, as a reader would.

As for the README (tests/test_readme.py): each block runs in a fresh temporary directory
with ``examples/`` linked in, then a second time in the same directory, so a snippet that
only works once fails here; absolute ``/tmp/`` paths are redirected into that directory.

An HTML comment on the line before a block (invisible on the site) says how it runs:

``<!-- needs: kafka, nats -->``
    runs only when those servers answer (`tests.brokers.require_broker`: skipped locally
    with how to start them, a failure under ``CI=true``, where CI starts every server);
``<!-- skip: REASON -->``
    never runs (an install command, a server that runs until Ctrl-C, an excerpt of a
    larger file); the reason is the skip message, so ``pytest -ra`` lists every one;
``<!-- file: NAME -->``
    before a block of any language: the block is a file of the page (a config, a handler
    module), written as NAME into the directory of every block of that page before it runs;
``<!-- continues -->``
    the block goes on from the previous block of its language on the page (a guide's next
    step): that block's code runs first, in the same process.

Several markers may stand on consecutive lines before one block.

Pages that other issues are still writing carry no markers yet; `MARKED_HERE` marks their
blocks from here, each with its reason. Use ``console`` or ``text`` blocks for commands that
are shown, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.brokers import canonical_name, require_broker

REPOSITORY = Path(__file__).resolve().parents[1]
DOCS = REPOSITORY / "docs"
_TIMEOUT_SECONDS = 180

#: (page, a text found in the block) -> "skip: why" or "needs: brokers", for pages whose
#: authors have not marked their blocks yet.
MARKED_HERE = {
    ("endpoints/aws.md", "sqs.eu-west-1.amazonaws.com"): "skip: needs an AWS account "
    "(tests/mq_bridge/endpoints/test_aws.py runs the same calls against the SQS server)",
    ("endpoints/aws.md", "bench/aws_bench.py"): "skip: a benchmark, minutes long",
    ("endpoints/sqlx.md", "postgres://app@db"): "skip: names the reader's database host "
    "(tests/mq_bridge/endpoints/test_sqlx*.py run these calls against PostgreSQL)",
    ("endpoints/kafka.md", "scale_out_kafka.yaml"): "skip: runs until Ctrl-C "
    "(tests/mq_bridge/endpoints/test_kafka_scale_out.py runs three of it)",
}

_MARKER = re.compile(r"^<!--\s*(needs|skip|file|continues)\s*(?::\s*(.*?))?\s*-->$")
_OPEN = re.compile(r"^```([\w-]*)$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/
    number: int
    language: str
    code: str  # what runs: with `continues`, the blocks it continues come first
    markers: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.page}-{self.number}"

    def marker(self, name: str) -> str | None:
        return dict(self.markers).get(name)


def _page_blocks(path: Path) -> list[Block]:
    page = path.relative_to(DOCS).as_posix()
    blocks: list[Block] = []
    markers: list[tuple[str, str]] = []
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if found := _MARKER.match(line.strip()):
            markers.append((found[1], found[2] or ""))
            continue
        opening = _OPEN.match(line)
        if not opening:
            markers = markers if not line.strip() else []
            continue
        code = "".join(f"{body}\n" for body in iter(lambda: next(lines), "```"))
        markers += _marked_here(page, code, markers)
        if "continues" in dict(markers):
            earlier = [b for b in blocks if b.language == opening[1] and not b.marker("file")]
            code = (earlier[-1].code if earlier else "") + code
        blocks.append(Block(page, len(blocks) + 1, opening[1], code, tuple(markers)))
        markers = []
    return blocks


def _marked_here(page: str, code: str, markers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    if markers:
        return []
    for (where, text), mark in MARKED_HERE.items():
        if where == page and text in code:
            name, reason = mark.split(":", 1)
            return [(name.strip(), reason.strip())]
    return []


def all_blocks() -> list[Block]:
    return [block for path in sorted(DOCS.rglob("*.md")) for block in _page_blocks(path)]


#: Fence languages that run, by the interpreter that runs them: a shell block cannot escape
#: the test by being spelled ``sh``.
LANGUAGES = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}


def runnable_blocks() -> list[Block]:
    """Every python/bash block, skipped ones included (they skip with their reason)."""
    return [b for b in all_blocks() if b.language in LANGUAGES and b.marker("file") is None]


def _page_files(page: str) -> dict[str, str]:
    blocks = [b for b in all_blocks() if b.page == page and b.marker("file")]
    return {str(b.marker("file")): b.code for b in blocks}


def test_every_marker_is_complete() -> None:
    """A skip says why, needs names known servers, file names a relative path."""
    for block in all_blocks():
        skip, needs, file = block.marker("skip"), block.marker("needs"), block.marker("file")
        if skip is not None:
            assert len(skip) > 10, f"{block.id}: say why it is skipped"
        for name in (needs or "").split(","):
            if name.strip():
                canonical_name(name.strip())  # a KeyError names the typo
        if file is not None:
            assert file and not Path(file).is_absolute() and ".." not in file, block.id


def test_every_entry_marked_here_names_a_block() -> None:
    codes = {(b.page, b.code) for b in all_blocks()}
    stale = [key for key in MARKED_HERE if not any(key[0] == p and key[1] in c for p, c in codes)]
    assert stale == []


def test_the_docs_have_runnable_blocks() -> None:
    """The collector finds the blocks (a broken pattern would skip every doc silently)."""
    blocks = runnable_blocks()
    assert len([b for b in blocks if not b.markers]) >= 10
    assert [b for b in blocks if b.marker("needs")] and [b for b in blocks if b.marker("skip")]


def _environment(tmp_path: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": str(tmp_path),  # a page's handler modules import by name
    }
    env.pop("TWAINMQ_ROOT", None)
    return env


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda block: block.id)
def test_docs_block_runs_twice(block: Block, tmp_path: Path) -> None:
    if block.marker("skip") is not None:
        pytest.skip(f"{block.id}: {block.marker('skip')}")
    for name in (block.marker("needs") or "").split(","):
        if name.strip():
            require_broker(name.strip())
    (tmp_path / "examples").symlink_to(REPOSITORY / "examples")
    for name, content in _page_files(block.page).items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content.replace("/tmp/", f"{tmp_path}/"), encoding="utf-8")
    code = block.code.replace("/tmp/", f"{tmp_path}/")
    # bash -e -o pipefail: a failing line fails the block, as it would stop a reader
    bash = ["bash", "-e", "-o", "pipefail", "-c", code]
    command = [sys.executable, "-c", code] if LANGUAGES[block.language] == "python" else bash
    for attempt in ("first", "second"):
        result = subprocess.run(
            command, cwd=tmp_path, env=_environment(tmp_path), capture_output=True, text=True,
            timeout=_TIMEOUT_SECONDS,
        )  # fmt: skip
        assert result.returncode == 0, f"{attempt} run failed:\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr


def _config_documents() -> list[Block]:
    """The yaml blocks that are whole config documents (routes/publishers/consumers)."""
    import yaml

    found = []
    for block in all_blocks():
        if block.language != "yaml":
            continue
        document = yaml.safe_load(block.code)
        if isinstance(document, dict) and {"routes", "publishers", "consumers"} & set(document):
            found.append(block)
    return found


@pytest.mark.parametrize("block", _config_documents(), ids=lambda block: block.id)
def test_docs_configs_are_valid(block: Block) -> None:
    """A config shown in the docs passes `validate` (it is not run: it may name brokers)."""
    from mq_bridge.config.loader import validate_document

    assert validate_document(("str", block.code)) == []
