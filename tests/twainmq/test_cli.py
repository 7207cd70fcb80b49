"""The ``twainmq`` command line, run in-process and (once) as the installed script."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter

import pytest

from twainmq.cli import main, progress


class Terminal(io.StringIO):
    """A text stream that says it is a terminal, as stderr does in an interactive shell."""

    def isatty(self) -> bool:
        return True


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
    monkeypatch.setattr(sys, "stdin", io.StringIO("a:one\nb:two\n"))
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


def test_stdin_lines_without_a_key_fit_any_key_space(tmp_path, capsys, monkeypatch):
    root = str(tmp_path)
    run(capsys, "--root", root, "create", "t", "-k", "u8", "-p", "3")
    lines = "".join(f"{n}\n" for n in range(1000))  # 1000 lines, 256 keys: keys never count up
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    code, _, err = run(capsys, "--root", root, "produce", "t")
    assert (code, err) == (0, "wrote 1000 message(s) to 't'\n")
    _, out, _ = run(capsys, "--root", root, "consume", "t", "--json")
    messages = [json.loads(line) for line in out.splitlines()]
    assert sorted(int(m["message"]) for m in messages) == list(range(1000))
    assert {m["key"] for m in messages} == {0}  # no key of the user's: round-robin
    assert sorted(Counter(m["partition"] for m in messages).values()) == [333, 333, 334]


def test_a_failure_mid_stream_says_what_was_written(tmp_path, capsys, monkeypatch):
    root = str(tmp_path)
    run(capsys, "--root", root, "create", "t", "-k", "char2")
    monkeypatch.setattr(sys, "stdin", io.StringIO("a:1\nb:2\nccc:3\nd:4\n"))
    code, out, err = run(capsys, "--root", root, "produce", "t", "--key-separator", ":")
    assert (code, out) == (1, "")
    assert err == (
        "twainmq: error: key 'ccc' is 3 bytes in UTF-8, longer than char2 allows; stopped at "
        "line 3: lines 1..2 were written to 't', nothing after them\n"
    )
    assert len(run(capsys, "--root", root, "consume", "t")[1].splitlines()) == 2


def test_progress_goes_to_stderr_and_stdout_stays_clean(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "_INTERVAL_SECONDS", 0)
    root = str(tmp_path)
    run(capsys, "--root", root, "create", "t")
    monkeypatch.setattr(sys, "stdin", io.StringIO("x\n" * 1000))
    code, out, err = run(capsys, "--root", root, "produce", "t", "--progress")
    assert (code, out) == (0, "")
    assert "768 lines written to 't' (" in err  # one line per 256 with no interval
    code, out, err = run(capsys, "--root", root, "consume", "t", "--progress")
    assert out.count("\n") == 1000 and all(line.endswith("Z\tx") for line in out.splitlines())
    assert "1,000 messages read" not in out and "messages read from 't'" in err
    code, _, err = run(capsys, "--root", root, "consume", "t")  # stderr is no terminal
    assert err == ""


def test_a_live_progress_line_is_cleared_before_the_summary(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "_INTERVAL_SECONDS", 0)
    terminal = Terminal()
    shown = progress.Progress("lines", None, stream=terminal)
    for count in range(1, 600):
        shown.update(count)
    shown.finish()
    assert terminal.getvalue().startswith("\r\x1b[K256 lines (")
    assert terminal.getvalue().endswith("\r\x1b[K") and "\n" not in terminal.getvalue()


@pytest.mark.parametrize(
    "argv",
    [["list"], ["describe", "t"], ["consume", "t"], ["groups", "list"], ["produce", "t", "x"]],
)
def test_commands_other_than_create_do_not_make_a_missing_store(tmp_path, capsys, argv):
    root = tmp_path / "typo"
    code, out, err = run(capsys, "--root", str(root), *argv)
    assert (code, out) == (1, "")
    assert err == (
        f"twainmq: error: the store directory {root} (from --root) does not exist; create a "
        f"topic to make it: twainmq --root {root} create TOPIC\n"
    )
    assert not root.exists()


def test_a_root_that_is_a_file_is_named(tmp_path, capsys, monkeypatch):
    file = tmp_path / "passwd"
    file.write_text("")
    monkeypatch.setenv("TWAINMQ_ROOT", str(file))
    code, _, err = run(capsys, "list")
    assert code == 1
    assert err == (
        f"twainmq: error: the store directory {file} (from $TWAINMQ_ROOT) is a file, "
        "not a directory\n"
    )
    code, _, err = run(capsys, "--root", str(file / "sub"), "create", "t")
    assert code == 1
    assert err == (
        f"twainmq: error: cannot create the store directory {file / 'sub'} (from --root): "
        "Not a directory\n"
    )


def test_create_if_not_exists_leaves_the_topic_alone(tmp_path, capsys):
    root = str(tmp_path)
    assert run(capsys, "--root", root, "create", "t", "-p", "2")[0] == 0
    assert run(capsys, "--root", root, "create", "t", "-p", "2")[0] == 1
    code, out, _ = run(capsys, "--root", root, "create", "t", "-p", "5", "--if-not-exists")
    assert code == 0
    assert out == "topic 't' exists already (2 partition(s), u16 keys): left as it is\n"


def test_help_texts_are_plain(capsys):
    for argv in (["produce", "--help"], ["consume", "--help"], ["--help"], ["demo", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert "``" not in capsys.readouterr().out
