"""``mq-bridge run``: routes of a file with handlers from the command line, until done."""

from __future__ import annotations

import io
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from mq_bridge.cli import main
from tests.mq_bridge.cli.helpers import (
    bridge_logging_restored,
    cli,
    read_json_lines,
    write_json_lines,
)

TWO_ROUTES = """\
routes:
  double:
    input: {{file: {{path: {dir}/in.jsonl, format: raw}}}}
    output: {{file: {{path: {dir}/doubled.jsonl, format: raw}}}}
  audit:
    input: {{file: {{path: {dir}/in.jsonl, format: raw}}}}
    output: {{file: {{path: {dir}/audit.jsonl, format: raw}}}}
"""

HANDLERS = """\
def double(message):
    value = message.json()
    return {"n": value["n"] * 2}

def tag(message):
    return {"audited": message.json()["n"]}

def created(value):
    return {"created": value["n"]}

KINDS = {"order.created": created}
NOT_A_FUNCTION = 42
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with in.jsonl (n = 0..99), the two-route config and a handler module."""
    write_json_lines(tmp_path / "in.jsonl", [{"n": n} for n in range(100)])
    (tmp_path / "bridge.yaml").write_text(TWO_ROUTES.format(dir=tmp_path))
    (tmp_path / "handlers.py").write_text(HANDLERS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_runs_every_route_until_its_input_is_exhausted(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(
        capsys, "run", "bridge.yaml", "--handler", "double=handlers.py:double",
        "--handler", "audit=handlers.py:tag",
    )  # fmt: skip
    assert code == 0, err
    assert read_json_lines(workdir / "doubled.jsonl") == [{"n": 2 * n} for n in range(100)]
    assert read_json_lines(workdir / "audit.jsonl") == [{"audited": n} for n in range(100)]
    assert "route double: 100 messages in" in out
    assert "route audit: 100 messages in" in out
    assert "stopped: every input is exhausted" in err


def test_route_picks_the_routes_to_run(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(
        capsys, "run", "bridge.yaml", "--route", "audit", "--handler", "handlers:tag"
    )
    assert code == 0
    assert not (workdir / "doubled.jsonl").exists()
    assert len(read_json_lines(workdir / "audit.jsonl")) == 100
    assert "double" not in out


def test_a_mapping_of_kinds_adds_kind_handlers(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "kinds.yaml").write_text(
        textwrap.dedent(f"""\
            input: {{file: {{path: {workdir}/events.jsonl, format: json}}}}
            output: {{file: {{path: {workdir}/created.jsonl, format: raw}}}}
        """)
    )
    # format json: envelopes that carry the metadata (the kind), written into the input
    sent = ["--json", "-m", "kind=order.created", '{"n": 1}', '{"n": 2}']
    assert cli(capsys, "send", "kinds.yaml", "--route", "route", *sent)[0] == 0
    code, _, err = cli(capsys, "run", "kinds.yaml", "--handler", "handlers:KINDS")
    assert code == 0, err
    assert read_json_lines(workdir / "created.jsonl") == [{"created": 1}, {"created": 2}]


def test_a_module_handler_imports_from_the_current_directory(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = f"handlers_{uuid.uuid4().hex[:8]}"  # a fresh name: modules are cached per process
    (workdir / f"{module}.py").write_text(HANDLERS)
    code, _, err = cli(
        capsys, "run", "bridge.yaml", "--route", "double", "--handler", f"{module}:double"
    )
    assert code == 0, err
    assert read_json_lines(workdir / "doubled.jsonl")[-1] == {"n": 198}


def test_a_bare_route_file_runs(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "bare.yaml").write_text(
        textwrap.dedent(f"""\
            input: {{file: {{path: {workdir}/in.jsonl, format: raw}}}}
            output: {{file: {{path: {workdir}/bare.jsonl, format: raw}}}}
        """)
    )
    code, out, _ = cli(capsys, "run", "bare.yaml")
    assert code == 0
    assert read_json_lines(workdir / "bare.jsonl") == [{"n": n} for n in range(100)]
    assert "route route: 100 messages" in out


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (
            "handlers.py:missing",
            "--handler handlers.py:missing: handlers.py has no attribute 'missing'",
        ),
        ("handlers.py:NOT_A_FUNCTION", "NOT_A_FUNCTION is not a function (its type is int)"),
        ("no_such_module:f", "--handler no_such_module:f: no module named 'no_such_module'"),
        ("nowhere/h.py:f", "--handler nowhere/h.py:f: no such file: nowhere/h.py"),
        ("handlers.py", "--handler handlers.py: expected MODULE:FUNCTION or FILE.py:FUNCTION"),
        ("ghost=handlers.py:tag", "--handler ghost=...: no route 'ghost' runs (double, audit)"),
    ],
)
def test_bad_handlers_are_one_line_errors(
    workdir: Path, capsys: pytest.CaptureFixture[str], handler: str, expected: str
) -> None:
    code, out, err = cli(capsys, "run", "bridge.yaml", "--handler", handler)
    assert (code, out) == (1, "")
    assert err.startswith("mq-bridge: error: --handler ") and err.count("\n") == 1
    assert expected in err
    assert not (workdir / "doubled.jsonl").exists()


def test_a_handler_module_that_fails_to_import_is_named(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "broken.py").write_text("raise RuntimeError('no config here')\n")
    code, _, err = cli(capsys, "run", "bridge.yaml", "--handler", "broken.py:f")
    assert code == 1
    assert "importing broken.py failed: RuntimeError: no config here" in err


def test_unknown_route_and_invalid_config(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "run", "bridge.yaml", "--route", "tripple")
    assert code == 1
    assert "no route named 'tripple'; routes: double, audit" in err
    (workdir / "bad.yaml").write_text("routes:\n  r:\n    input: {file: {}}\n")
    code, _, err = cli(capsys, "run", "bad.yaml")
    assert code == 1
    assert "routes.r.input.file.path" in err


def test_stop_when_idle_ends_a_route_on_a_stream(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "stream.yaml").write_text(
        textwrap.dedent(f"""\
            input: {{twain: {{root: {workdir}/store, topic: t, create: {{partitions: 2}}}}}}
            output: {{file: {{path: {workdir}/from_stream.jsonl, format: raw}}}}
        """)
    )
    code, _, err = cli(
        capsys, "send", "stream.yaml", "--route", "route", "--json", '{"a": 1}', '{"a": 2}'
    )
    assert code == 0, err
    code, out, err = cli(capsys, "run", "stream.yaml", "--stop-when-idle", "0.5")
    assert code == 0, err
    assert "stopped: no new message for 0.5 s" in err
    assert "route route: 2 messages" in out
    assert sorted(v["a"] for v in read_json_lines(workdir / "from_stream.jsonl")) == [1, 2]


def test_stop_when_idle_waits_for_a_batch_slower_than_the_idle_time(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each batch takes 0.6 s to handle, twice the idle time: a busy route is not idle (on a
    # loaded machine an ordinary batch can take that long; the rerun of
    # test_run_signals.py stopped there with most of the stream unread).
    (workdir / "batches.yaml").write_text(
        textwrap.dedent(f"""\
            routes:
              slow:
                batch_size: 3
                input: {{twain: {{root: {workdir}/store, topic: t, create: {{partitions: 1}}}}}}
                output: {{file: {{path: {workdir}/handled.jsonl, format: raw}}}}
        """)
    )
    (workdir / "slow.py").write_text("import time\ndef f(m):\n    time.sleep(0.2)\n    return m\n")
    values = [f'{{"n": {n}}}' for n in range(9)]
    code, _, err = cli(capsys, "send", "batches.yaml", "--route", "slow", "--json", *values)
    assert code == 0, err
    code, out, err = cli(
        capsys, "run", "batches.yaml", "--handler", "slow.py:f", "--stop-when-idle", "0.3"
    )
    assert code == 0, err
    assert "stopped: no new message for 0.3 s" in err
    assert "route slow: 9 messages" in out
    assert [v["n"] for v in read_json_lines(workdir / "handled.jsonl")] == list(range(9))


def test_progress_lines_show_totals_and_rates(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "slow.py").write_text("import time\ndef f(m):\n    time.sleep(0.01)\n    return m\n")
    code, _, err = cli(
        capsys, "run", "bridge.yaml", "--route", "double", "--handler", "slow.py:f",
        "--progress-interval", "0.2",
    )  # fmt: skip
    assert code == 0
    progress = [line for line in err.splitlines() if line.startswith("[")]
    assert progress, err
    assert all("double: " in line and " msg/s" in line for line in progress)
    quiet = cli(capsys, "run", "bridge.yaml", "--route", "audit", "-q", "--progress-interval", "0")
    assert not [line for line in quiet[2].splitlines() if line.startswith("[")]


def test_a_route_that_fails_stops_the_run_with_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "panics.yaml").write_text(
        textwrap.dedent(f"""\
            routes:
              fragile:
                allow_fault_injection: true
                batch_size: 10
                input:
                  file: {{path: {workdir}/in.jsonl, format: raw}}
                  middlewares: [{{random_panic: {{mode: panic, trigger_on_message: 35}}}}]
                output: {{file: {{path: {workdir}/fragile.jsonl, format: raw}}}}
        """)
    )
    code, out, err = cli(capsys, "run", "panics.yaml")
    assert (code, out) == (1, "")
    assert err.splitlines()[-1].startswith("mq-bridge: error: route 'fragile' stopped: ")
    assert "injected panic" in err.splitlines()[-1]  # stopped by the fault it was given
    assert "Traceback" not in err
    assert len(read_json_lines(workdir / "fragile.jsonl")) == 30  # the batches before it


def test_a_route_without_handler_says_first_that_it_forwards_unchanged(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "run", "bridge.yaml", "--handler", "double=handlers.py:double")
    assert code == 0, err
    assert err.splitlines()[0] == (
        "mq-bridge: warning: route 'audit' has no handler: it forwards every message "
        "unchanged to its output (give one with --handler)"
    )
    assert "'double' has no handler" not in err
    assert read_json_lines(workdir / "audit.jsonl") == [{"n": n} for n in range(100)]


FAILING = """\
from mq_bridge import NonRetryableError

def odd_fails(message):
    if message.json()["n"] % 2:
        raise NonRetryableError("odd orders are refused")
    return message
"""


def test_dropped_messages_are_counted_and_exit_3(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "failing.py").write_text(FAILING)
    code, out, err = cli(
        capsys, "run", "bridge.yaml", "--route", "double", "--handler", "failing.py:odd_fails"
    )
    assert code == 3
    assert "route double: 100 messages in " in out and "msg/s); 50 dropped\n" in out
    assert "dropping message" in err  # the bridge's warning names each one
    assert err.splitlines()[-1].startswith(
        "mq-bridge: error: 50 messages dropped (route 'double': 50): the handler or the output "
        "failed for good"
    )
    assert len(read_json_lines(workdir / "doubled.jsonl")) == 50


def test_dead_lettered_messages_are_counted_and_exit_0(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "failing.py").write_text(FAILING)
    (workdir / "dlq.yaml").write_text(
        textwrap.dedent(f"""\
            input: {{file: {{path: {workdir}/in.jsonl, format: raw}}}}
            output:
              file: {{path: {workdir}/even.jsonl, format: raw}}
              middlewares:
                - dlq: {{endpoint: {{file: {{path: {workdir}/dead.jsonl, format: raw}}}}}}
        """)
    )
    code, out, err = cli(capsys, "run", "dlq.yaml", "--handler", "failing.py:odd_fails")
    assert code == 0, err
    assert "msg/s); 50 dead-lettered\n" in out
    assert len(read_json_lines(workdir / "dead.jsonl")) == 50


def test_quiet_prints_nothing_but_errors(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "run", "bridge.yaml", "-q", "--progress-interval", "0") == (0, "", "")
    (workdir / "failing.py").write_text(FAILING)
    code, out, err = cli(
        capsys, "run", "bridge.yaml", "-q", "--route", "double", "--handler", "failing.py:odd_fails"
    )
    assert (code, out) == (3, "")
    assert err.startswith("mq-bridge: error: 50 messages dropped") and err.count("\n") == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_live_progress_line_ends_before_stopped(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "slow.py").write_text(
        "import time\ndef f(m):\n    time.sleep(0.005)\n    return m\n"
    )
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = ["run", "bridge.yaml", "--route", "audit", "--handler", "slow.py:f"]
    with bridge_logging_restored():
        assert main([*argv, "--progress-interval", "0.05"]) == 0
    shown = terminal.getvalue()
    assert "\r\x1b[K[" in shown
    assert "\nstopped: every input is exhausted\n" in shown
    assert not shown.split("stopped:")[0].endswith("\r\x1b[K")


def test_the_exit_statuses_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "run", "--help")
    assert code == 0
    assert "3 when the run ended\nbut dropped messages" in out
    assert "``" not in out
