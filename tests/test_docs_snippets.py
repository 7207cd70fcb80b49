"""Every ``python`` and ``bash`` block of docs/**/*.md runs, twice in a row, as a reader would.

As for the README (tests/test_readme.py): each block runs in a fresh temporary directory
with ``examples/`` linked in, then a second time in the same directory, so a snippet that
only works once fails here; absolute ``/tmp/`` paths are redirected into that directory.

What a reader must know to run a block is said in the paragraph before it, visibly, and
this runner reads the same words:

"Save this as `NAME`:"
    (a paragraph ending with a colon) before a block of any language: the block is a
    file of the page (a config, a handler module), written as NAME into the directory of
    every block of that page before it runs;
"... continues the previous block ..." (or "continuing the previous block")
    the block goes on from the previous block of the page that runs (python or bash; a
    guide's next step): that block runs first, then this one -- in the same process when
    both are python, else in one bash session (a python block as ``python -`` with the
    code on stdin), so a service started in the background by one block (``... &``)
    answers the next, and is stopped when the session ends.

Only what the reader need not know is an HTML comment on the line before a block
(invisible on the site):

``<!-- needs: kafka, nats -->``
    runs only when those servers answer (`tests.brokers.require_broker`: skipped locally
    with how to start them, a failure under ``CI=true``, where CI starts every server);
``<!-- skip: REASON -->``
    never runs (an install command, a server that runs until Ctrl-C, an excerpt of a
    larger file); the reason is the skip message, so ``pytest -ra`` lists every one.

Several markers may stand on consecutive lines before one block.

Pages that other issues are still writing carry no markers yet; `MARKED_HERE` marks their
blocks from here, each with its reason. Use ``console`` or ``text`` blocks for commands that
are shown, not run.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
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

_MARKER = re.compile(r"^<!--\s*(needs|skip)\s*(?::\s*(.*?))?\s*-->$")
_OPEN = re.compile(r"^```([\w-]*)$")
#: The visible forms, read from the paragraph before a block (its lines joined).
_SAVE_AS = re.compile(r"\bSave (?:this|it) as `([^`]+)`.*:$")
_CONTINUES = re.compile(r"\bcontinu(?:es|ing) the previous block\b", re.IGNORECASE)
#: The invisible forms these replaced: a page that still has one fails
#: `test_what_a_reader_needs_is_visible`.
_INVISIBLE = re.compile(r"^<!--\s*(file|continues)\b")


@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/
    number: int
    language: str
    code: str  # the block's own code
    markers: tuple[tuple[str, str], ...] = ()
    #: What runs, in order: the blocks it continues, then this one (language, code).
    steps: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.page}-{self.number}"

    def marker(self, name: str) -> str | None:
        return dict(self.markers).get(name)


def _page_blocks(path: Path, page: str | None = None) -> list[Block]:
    page = page or path.relative_to(DOCS).as_posix()
    blocks: list[Block] = []
    markers: list[tuple[str, str]] = []
    paragraph: list[str] = []  # the text just before the next block
    ended = False  # a blank line ended `paragraph`: the next text starts another
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if found := _MARKER.match(line.strip()):
            markers.append((found[1], found[2] or ""))
            continue
        opening = _OPEN.match(line)
        if not opening:
            if line.strip():
                markers, paragraph = [], ([] if ended else paragraph) + [line.strip()]
            ended = not line.strip()
            continue
        code = "".join(f"{body}\n" for body in iter(lambda: next(lines), "```"))
        markers += _visible_markers(" ".join(paragraph))
        markers += _marked_here(page, code, markers)
        steps = ((LANGUAGES.get(opening[1], opening[1]), code),)
        if "continues" in dict(markers):
            earlier = [b for b in blocks if b.language in LANGUAGES and not b.marker("file")]
            steps = (earlier[-1].steps if earlier else ()) + steps
        blocks.append(Block(page, len(blocks) + 1, opening[1], code, tuple(markers), steps))
        markers, paragraph, ended = [], [], False
    return blocks


def _visible_markers(paragraph: str) -> list[tuple[str, str]]:
    """The markers that the paragraph before a block states in words."""
    found = []
    if saved := _SAVE_AS.search(paragraph):
        found.append(("file", saved[1]))
    if _CONTINUES.search(paragraph):
        found.append(("continues", ""))
    return found


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


def test_what_a_reader_needs_is_visible() -> None:
    """A block's file name and its continuing the previous block are said in words (an
    HTML comment shows neither on the site nor on GitHub)."""
    invisible = [
        f"{path.relative_to(DOCS)}:{number}: {line.strip()}"
        for path in sorted(DOCS.rglob("*.md"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _INVISIBLE.match(line.strip())
    ]
    assert invisible == [], (
        "say it in the paragraph before the block instead: "
        '"Save this as `NAME`:" or "... (this block continues the previous block):"'
    )


def test_a_continued_block_runs() -> None:
    """A block continues one that runs (continuing a skipped one would run it first)."""
    blocks = runnable_blocks()
    for before, block in zip([None, *blocks], blocks, strict=False):
        if block.marker("continues") is not None:
            assert before is not None and before.page == block.page, block.id
            assert before.marker("skip") is None, f"{block.id} continues a skipped block"


def test_the_visible_markers_are_read(tmp_path: Path) -> None:
    """The paragraph before a block names its file and its predecessor; a python block
    that continues a bash block runs in its session, with the service it started."""
    page = tmp_path / "page.md"
    page.write_text(
        "Save this as `serve.py`:\n\n```python\nprint('served')\n```\n\n"
        "Start it in the background:\n\n```bash\nsleep 30 &\necho started\n```\n\n"
        "Then call it\n(this block continues the previous block):\n\n"
        "<!-- needs: kafka -->\n```python\nprint('called')\n```\n\n"
        "Not saved: save this as `x.py` later.\n\n```python\nprint('alone')\n```\n",
        encoding="utf-8",
    )
    served, started, called, alone = _page_blocks(page, "page.md")
    assert served.marker("file") == "serve.py" and started.markers == ()
    assert dict(called.markers) == {"continues": "", "needs": "kafka"}
    assert called.steps == (("bash", "sleep 30 &\necho started\n"), ("python", "print('called')\n"))
    assert alone.markers == ()
    command = _command(called.steps, tmp_path)
    result = subprocess.run(command, capture_output=True, text=True, timeout=20)
    assert (result.returncode, result.stdout) == (0, "started\ncalled\n"), result.stderr


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


#: Ends a bash session's background jobs (a service a block started with ``&``), so the
#: test's pipes close and the next run finds the port free.
_STOP_BACKGROUND = "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n"
_HEREDOC = "MQ_BRIDGE_DOCS_PYTHON"


def _command(steps: tuple[tuple[str, str], ...], tmp_path: Path) -> list[str]:
    """The command that runs `steps` in page order: python alone in one process, else one
    bash session (``-e -o pipefail``: a failing line fails it, as it would stop a reader)."""
    steps = tuple((language, code.replace("/tmp/", f"{tmp_path}/")) for language, code in steps)
    if all(language == "python" for language, _ in steps):
        return [sys.executable, "-c", "".join(code for _, code in steps)]
    script = [_STOP_BACKGROUND]
    for language, group in itertools.groupby(steps, key=lambda step: step[0]):
        code = "".join(code for _, code in group)
        if language == "python":
            code = f"{shlex.quote(sys.executable)} - <<'{_HEREDOC}'\n{code}{_HEREDOC}\n"
        script.append(code)
    return ["bash", "-e", "-o", "pipefail", "-c", "".join(script)]


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
    command = _command(block.steps, tmp_path)
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
