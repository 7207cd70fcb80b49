"""Progress lines and summaries, counted by the `metrics` middleware a route really runs."""

from __future__ import annotations

import io
import time
import uuid

from mq_bridge import Publisher, Route
from mq_bridge.cli.progress import ProgressReporter, RouteCounter, with_metrics_first


class Terminal(io.StringIO):
    """A text stream that says it is a terminal, as stderr does in an interactive shell."""

    def isatty(self) -> bool:
        return True


def _route_through_memory(name: str, count: int) -> None:
    topic = f"progress-{uuid.uuid4().hex[:8]}"
    config = with_metrics_first({"input": {"memory": {"topic": topic}}, "output": {"null": {}}})
    publisher = Publisher.from_config({"memory": {"topic": topic}})
    counter = RouteCounter(name)
    with Route.from_config(config, name):
        for n in range(count):
            publisher.send_json({"n": n})
        while counter.counts()[0] < count:
            time.sleep(0.001)  # acked within milliseconds; the test timeout bounds a bug


def test_metrics_go_first_once() -> None:
    route = {"input": {"memory": {"topic": "t"}, "middlewares": [{"retry": {}}]}}
    once = with_metrics_first(route)
    assert once["input"]["middlewares"] == [{"metrics": {}}, {"retry": {}}]
    assert with_metrics_first(once)["input"]["middlewares"] == once["input"]["middlewares"]
    assert route["input"]["middlewares"] == [{"retry": {}}]  # the caller's config is untouched


def test_counts_start_from_zero_for_a_reused_route_name() -> None:
    name = f"reused-{uuid.uuid4().hex[:8]}"
    _route_through_memory(name, 30)
    counter = RouteCounter(name)
    assert counter.counts() == (0, 0)
    _route_through_memory(name, 20)
    assert counter.counts() == (20, 0)


def test_a_terminal_gets_one_line_rewritten_and_the_summary_after_it() -> None:
    name = f"tty-{uuid.uuid4().hex[:8]}"
    terminal, summary = Terminal(), io.StringIO()
    reporter = ProgressReporter([RouteCounter(name)], interval=0, stream=terminal)
    _route_through_memory(name, 25)
    reporter.tick()
    reporter.tick()
    reporter.summary(summary)
    shown = terminal.getvalue()
    assert shown.count("\r\x1b[K") == 2 and shown.endswith("\n")
    assert f"{name}: 25 done" in shown
    assert summary.getvalue().startswith(f"route {name}: 25 messages in ")


def test_a_pipe_gets_one_line_per_interval_and_quiet_gets_none() -> None:
    name = f"pipe-{uuid.uuid4().hex[:8]}"
    pipe, quiet_stream = io.StringIO(), io.StringIO()
    reporter = ProgressReporter([RouteCounter(name)], interval=0, stream=pipe)
    quiet = ProgressReporter([RouteCounter(name)], interval=0, stream=quiet_stream, quiet=True)
    _route_through_memory(name, 5)
    reporter.tick()
    quiet.tick()
    assert "\r" not in pipe.getvalue() and pipe.getvalue().count("\n") == 1
    assert f"{name}: 5 done" in pipe.getvalue()
    assert quiet_stream.getvalue() == ""
