"""`kit.bad_requests`: malformed requests are counted, logged one line each, rate-limited."""

from __future__ import annotations

import logging

import pytest
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

from mq_bridge.endpoints.kit import bad_requests
from mq_bridge.endpoints.kit.bad_requests import BadRequests, describe

LOG = logging.getLogger("tests.bad_requests")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(bad_requests.time, "monotonic", clock)
    return clock


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_flood_is_counted_in_full_and_logged_a_burst_per_interval(
    caplog: pytest.LogCaptureFixture, clock: Clock
) -> None:
    caplog.set_level(logging.WARNING)
    record = BadRequests(LOG, "http listener 127.0.0.1:8080", burst=3, interval=10)
    for n in range(100):
        record.note("10.0.0.1", f"BadHttpMessage: request {n}")
    assert record.count == 100
    assert lines(caplog) == [
        f"http listener 127.0.0.1:8080: malformed request from 10.0.0.1: BadHttpMessage: "
        f"request {n}"
        for n in range(3)
    ]
    clock.now += 10
    record.note(None, "BadStatusLine: again")
    assert record.count == 101
    assert lines(caplog)[-1] == (
        "http listener 127.0.0.1:8080: malformed request from ?: BadStatusLine: again "
        "(97 more not logged)"
    )


def test_the_server_logger_turns_aiohttps_traceback_into_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    record = BadRequests(LOG, "console")
    error = LineTooLong(b"x" * 9000, 8190)
    record.server_logger.exception("Error handling request from %s", "127.0.0.1", exc_info=error)
    assert record.count == 1
    [line] = lines(caplog)
    assert line.startswith("console: malformed request from 127.0.0.1: LineTooLong: Got more")
    assert len(line) < 300
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert debug and debug[0].exc_info is not None  # the traceback, at DEBUG only


def test_other_errors_reach_aiohttps_logger_unchanged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    record = BadRequests(LOG, "console")
    try:
        raise RuntimeError("a bug in a handler")
    except RuntimeError:
        record.server_logger.exception("Error handling request from %s", "127.0.0.1")
    assert record.count == 0
    [logged] = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert logged.levelno == logging.ERROR and logged.exc_info is not None


def test_describe_gives_one_printable_line() -> None:
    error = BadHttpMessage("Invalid header token:\n\n  b'Bad\\x00 Header: x'\n     ^")
    assert describe(error) == "BadHttpMessage: Invalid header token: b'Bad\\x00 Header: x'"
    assert describe(BadHttpMessage("bad\x1b[31m\nred")) == "BadHttpMessage: bad?[31m red"
    assert len(describe(BadHttpMessage("x" * 1000))) < 200
