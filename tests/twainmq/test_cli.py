"""The ``twainmq`` command line, run in-process and (once) as the installed script."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from twainmq.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_create_produce_consume_describe_delete(tmp_path, capsys):
    root = str(tmp_path / "store")
    assert run(capsys, "--root", root, "create", "events", "-p", "3")[0] == 0
    code, _, err = run(capsys, "--root", root, "produce", "events", "hello", "world", "-k", "7")
    assert (code, err.strip()) == (0, "wrote 2 message(s) to 'events'")

    code, out, _ = run(capsys, "--root", root, "consume", "events", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["message"] for line in lines] == ["hello", "world"]
    assert {line["key"] for line in lines} == {7}
    assert [line["offset"] for line in lines] == [0, 1]

    code, out, _ = run(capsys, "--root", root, "list")
    assert code == 0 and "events" in out and " 2 " in out
    code, out, _ = run(capsys, "--root", root, "describe", "events")
    assert code == 0 and "partition 2" in out and "messages kept: 2" in out
    assert run(capsys, "--root", root, "delete", "events")[0] == 0
    assert "no topics" in run(capsys, "--root", root, "list")[1]


def test_produce_reads_stdin_lines_with_keys(tmp_path, capsys, monkeypatch):
    root = str(tmp_path)
    run(capsys, "--root", root, "create", "t", "-k", "char8")
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("a:one\nb:two\n"))
    assert run(capsys, "--root", root, "produce", "t", "--key-separator", ":")[0] == 0
    _, out, _ = run(capsys, "--root", root, "consume", "t", "--json", "--max", "5")
    assert [(m["key"], m["message"]) for m in map(json.loads, out.splitlines())] == [
        ("a", "one"),
        ("b", "two"),
    ]


def test_consume_with_a_group_commits_so_the_next_run_resumes(tmp_path, capsys):
    root = str(tmp_path)
    run(capsys, "--root", root, "create", "t", "-p", "2")
    run(capsys, "--root", root, "produce", "t", "a", "b", "c")
    first = run(capsys, "--root", root, "consume", "t", "-g", "g", "-n", "2")[1].splitlines()
    rest = run(capsys, "--root", root, "consume", "t", "-g", "g")[1].splitlines()
    assert len(first) == 2 and len(rest) == 1


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["describe", "missing"], "'missing'"),
        (["create", "../escape"], "../escape"),
        (["create", "t", "-k", "u17"], "u17"),
        (["produce", "missing", "x"], "'missing'"),
    ],
)
def test_errors_are_one_line_naming_the_value(tmp_path, capsys, argv, needle):
    code, _, err = run(capsys, "--root", str(tmp_path), *argv)
    assert code == 1
    assert err.startswith("twainmq: error: ") and needle in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_bad_key_for_an_integer_topic_names_the_key(tmp_path, capsys):
    run(capsys, "--root", str(tmp_path), "create", "t")
    code, _, err = run(capsys, "--root", str(tmp_path), "produce", "t", "x", "-k", "abc")
    assert code == 1 and "'abc'" in err


def test_installed_script_reports_errors_without_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "twainmq", "--root", str(tmp_path), "describe", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "'nope'" in result.stderr


def test_demo_runs_and_reports_every_phase(capsys):
    code, out, _ = run(capsys, "demo", "--messages", "300")
    assert code == 0
    assert "read 600/600 orders back without a group" in out
    assert "(600/600)" in out  # the group shared every message between its two members
