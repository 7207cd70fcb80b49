"""``mq-bridge validate`` and ``mq-bridge schema``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mq_bridge.cli.helpers import cli, run_child

VALID = """\
routes:
  copy:
    input: {file: {path: in.jsonl}}
    output: {file: {path: out.jsonl}}
publishers:
  orders: {file: {path: in.jsonl}}
consumers:
  results: {file: {path: out.jsonl}}
"""


def test_a_valid_file_is_summarized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(VALID)
    code, out, err = cli(capsys, "validate", str(config))
    assert (code, err) == (0, "")
    assert out == f"{config}: valid (1 route: copy; 1 publisher: orders; 1 consumer: results)\n"


def test_every_problem_is_listed_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(
        "routes:\n"
        "  a:\n"
        "    input: {memory: {topic: x, capacity: -1}}\n"
        "    output: {static: {}}\n"
        "  b:\n"
        "    input: {response: {}}\n"
        "publishers:\n"
        "  p: {memry: {topic: z}}\n"
    )
    code, out, err = cli(capsys, "validate", str(config))
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == f"mq-bridge: error: {config}: 4 problems"
    assert sorted(line.strip().split(":")[0] for line in lines[1:]) == [
        "publishers.p.memry",
        "routes.a.input.memory.capacity",
        "routes.a.output.static.body",
        "routes.b.input.response",
    ]
    assert "did you mean 'memory'?" in err
    assert "got -1" in err


def test_problems_only_the_builders_know_are_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "order.yaml"
    config.write_text(
        "routes:\n"
        "  b:\n"
        "    input: {memory: {topic: x}}\n"
        "    output:\n"
        "      memory: {topic: y}\n"
        "      middlewares: [{retry: {}}, {dlq: {endpoint: {memory: {topic: d}}}}]\n"
    )
    code, _, err = cli(capsys, "validate", str(config))
    assert code == 1
    assert "  routes.b.output: middlewares: 'retry' is listed before 'dlq'" in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "config file not found"),
        ("routes: [unclosed\n", "invalid YAML at line 2"),
        ("", "the config is empty"),
    ],
)
def test_unreadable_files_give_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    config = tmp_path / "bridge.yaml"
    if content is not None:
        config.write_text(content)
    code, _, err = cli(capsys, "validate", str(config))
    assert code == 1
    assert err.startswith("mq-bridge: error: ") and expected in err
    assert len(err.splitlines()) == 1


def test_schema_is_the_json_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "schema")
    schema = json.loads(out)
    assert code == 0
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert {"FileConfig", "TwainConfig", "MemoryConfig"} <= set(schema["$defs"])
    target = tmp_path / "schema.json"
    assert cli(capsys, "schema", "-o", str(target))[0] == 0
    assert json.loads(target.read_text()) == schema


def test_the_console_entry_point_never_shows_a_traceback(tmp_path: Path) -> None:
    result = run_child("validate", "missing.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == "mq-bridge: error: config file not found: missing.yaml\n"
    usage = run_child("frobnicate", cwd=tmp_path)
    assert usage.returncode == 2 and "invalid choice: 'frobnicate'" in usage.stderr


def test_version_and_help_list_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from mq_bridge import __version__

    assert cli(capsys, "--version") == (0, f"mq-bridge {__version__}\n", "")
    code, out, _ = cli(capsys, "--help")
    assert code == 0
    for command in ("run", "validate", "schema", "send", "consume", "demo"):
        assert f"    {command} " in out


def _laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    "laughs.yaml": (_laughs(), "YAML aliases expand to more than 100,000 values"),
    "self.yaml": ("routes: &x {r: {input: *x}}\n", "the alias *x refers to a node that contains"),
    "deep.yaml": ("input: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested more than 64 levels"),
    "deep.json": ('{"input": ' + '{"a": ' * 20_000 + "1" + "}" * 20_001, "nested more than 64"),
    "block.yaml": ("".join("  " * i + f"k{i}:\n" for i in range(3000)), "nested more than 64"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_files_get_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    content, expected = HOSTILE[name]
    config = tmp_path / name
    config.write_text(content)
    for command in ("validate", "run"):
        code, out, err = cli(capsys, command, str(config))
        assert (code, out) == (1, ""), command
        [line] = err.splitlines()
        assert line.startswith(f"mq-bridge: error: {config}: config refused")
        assert expected in line


def test_a_billion_laughs_is_refused_by_the_console_command(tmp_path: Path) -> None:
    """The real entry point, in a child whose address space (1 GiB) expansion would burst."""
    config = tmp_path / "laughs.yaml"
    config.write_text(_laughs())
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from mq_bridge.cli import main\n"
        f"sys.exit(main(['validate', {str(config)!r}]))\n"
    )
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"mq-bridge: error: {config}: config refused at line 6")
    assert len(result.stderr.splitlines()) == 1


def test_validate_refuses_what_run_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "limits.yaml"
    config.write_text(
        "routes:\n"
        "  big:\n"
        "    input: {memory: {topic: in}}\n"
        f"    output: {{twain: {{root: {tmp_path}, topic: t, create: {{partitions: 70000}}}}}}\n"
        "  key:\n"
        "    input: {memory: {topic: in}}\n"
        f"    output: {{twain: {{root: {tmp_path}, topic: u, create: {{key_type: char999}}}}}}\n"
        "  nan:\n"
        "    input: {memory: {topic: in}}\n"
        f"    output: {{twain: {{root: {tmp_path}, topic: v,"
        " create: {retention_seconds: .nan}}}\n"
    )
    code, out, err = cli(capsys, "validate", str(config))
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == f"mq-bridge: error: {config}: 3 problems"
    assert sorted(line.strip().split(": ")[0] for line in lines[1:]) == [
        "routes.big.output.twain.create.partitions",
        "routes.key.output.twain.create.key_type",
        "routes.nan.output.twain.create.retention_seconds",
    ]
    assert "Traceback" not in err
    assert not (tmp_path / "t.twc").exists()
