"""``mq-bridge send`` and ``mq-bridge consume`` over files and the twainmq log."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.mq_bridge.cli.helpers import cli

SECTIONS = """\
publishers:
  orders: {{file: {{path: {dir}/orders.jsonl}}}}
consumers:
  orders: {{file: {{path: {dir}/orders.jsonl}}}}
  log: {{twain: {{root: {dir}/store, topic: events, group: viewer}}}}
routes:
  archive:
    input: {{twain: {{root: {dir}/store, topic: events, create: {{partitions: 2}}}}}}
    output: {{file: {{path: {dir}/archive.jsonl, format: raw}}}}
"""

#: consume stops after this long without a message (the default, 1 s, only slows tests)
QUICK = ("--timeout-ms", "300")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "bridge.yaml"
    path.write_text(SECTIONS.format(dir=tmp_path))
    return path


def test_send_then_consume_a_publisher_and_a_consumer(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(
        capsys, "send", str(config), "--publisher", "orders", "--json",
        "-m", "kind=order.created", '{"id": 1}', '{"id": 2}',
    )  # fmt: skip
    assert (code, err) == (0, "sent 2 message(s)\n")
    code, out, _ = cli(capsys, "consume", str(config), "--consumer", "orders", "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["payload"] for line in lines] == [{"id": 1}, {"id": 2}]
    assert all(line["metadata"] == {"kind": "order.created"} for line in lines)
    assert all(isinstance(line["id"], str) and line["id"] for line in lines)


def test_send_reads_stdin_lines_and_consume_prints_payloads(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("first\nsecond\nthird\n"))
    assert cli(capsys, "send", str(config), "--publisher", "orders")[0] == 0
    code, out, _ = cli(capsys, "consume", str(config), "--consumer", "orders", "--max", "2")
    assert (code, out) == (0, "first\nsecond\n")


def test_a_route_is_fed_and_read_through_the_log(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [f'{{"event": {n}}}' for n in range(5)]
    assert cli(capsys, "send", str(config), "--route", "archive", "--json", *events)[0] == 0
    code, out, _ = cli(capsys, "consume", str(config), "--consumer", "log", "--no-commit", *QUICK)
    assert code == 0
    assert sorted(out.splitlines()) == sorted(e.replace(" ", "") for e in events)
    # --no-commit left the group where it was: the same messages come again, then commit
    assert (
        len(cli(capsys, "consume", str(config), "--consumer", "log", *QUICK)[1].splitlines()) == 5
    )
    assert cli(capsys, "consume", str(config), "--consumer", "log", *QUICK)[1] == ""


def test_consume_route_reads_what_the_route_wrote(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "send", str(config), "--route", "archive", "--json", '{"a": 1}')[0] == 0
    code, _, err = cli(capsys, "run", str(config), "--stop-when-idle", "0.5", "-q")
    assert code == 0, err
    code, out, _ = cli(capsys, "consume", str(config), "--route", "archive", *QUICK)
    assert (code, out) == (0, '{"a":1}\n')


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--publisher", "orders", "--json", "{not json"], "message 1 is not JSON"),
        (
            ["--publisher", "orders", "-m", "novalue", "x"],
            "--metadata 'novalue': expected KEY=VALUE",
        ),
        (["--publisher", "ordres", "x"], "no publisher named 'ordres'; did you mean 'orders'?"),
        (["--route", "nope", "x"], "no route named 'nope'; routes: archive"),
    ],
)
def test_send_errors_are_one_line(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    code, _, err = cli(capsys, "send", str(config), *args)
    assert code == 1
    assert err.startswith("mq-bridge: error: ") and expected in err
    published = config.parent / "orders.jsonl"
    assert not published.exists() or published.read_text() == ""  # nothing half-sent


def test_consume_needs_a_positive_max(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "consume", str(config), "--consumer", "orders", "--max", "0")
    assert code == 2 and "0 must be at least 1" in err
