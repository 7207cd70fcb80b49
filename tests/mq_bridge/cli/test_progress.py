"""Progress lines and summaries, counted by the `metrics` middleware a route really runs."""

from __future__ import annotations

import io
import time
import uuid

from mq_bridge import Publisher, Route
from mq_bridge.cli.progress import Counts, ProgressReporter, RouteCounter, with_metrics_first
from mq_bridge.errors import NonRetryableError
from mq_bridge.middleware.metrics import metrics_snapshot


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
        while counter.counts().acked < count:
            time.sleep(0.001)  # acked within milliseconds; the test timeout bounds a bug


def test_metrics_go_first_once() -> None:
    route = {"input": {"memory": {"topic": "t"}, "middlewares": [{"retry": {}}]}}
    once = with_metrics_first(route)
    assert once["input"]["middlewares"] == [{"metrics": {}}, {"retry": {}}]
    assert with_metrics_first(once)["input"]["middlewares"] == once["input"]["middlewares"]
    assert route["input"]["middlewares"] == [{"retry": {}}]  # the caller's config is untouched


def test_dead_letter_endpoints_get_metrics_first_too() -> None:
    dead = {"memory": {"topic": "dead"}}
    route = {
        "input": {"memory": {"topic": "t"}},
        "output": {"null": {}, "middlewares": [{"retry": {}}, {"dlq": {"endpoint": dead}}]},
    }
    metered = with_metrics_first(route)
    assert metered["output"]["middlewares"] == [
        {"retry": {}},
        {"dlq": {"endpoint": {"memory": {"topic": "dead"}, "middlewares": [{"metrics": {}}]}}},
    ]
    assert dead == {"memory": {"topic": "dead"}}  # untouched


def _fail_odd(message):
    if message.json()["n"] % 2:
        raise NonRetryableError("odd")
    return message


def test_dropped_and_dead_lettered_messages_are_counted_and_summarized() -> None:
    name = f"failing-{uuid.uuid4().hex[:8]}"
    topic, dead = f"in-{uuid.uuid4().hex[:8]}", f"dead-{uuid.uuid4().hex[:8]}"
    dlq = [{"dlq": {"endpoint": {"memory": {"topic": dead}}}}]
    for middlewares, expected in (([], Counts(10, 0, 5, 0)), (dlq, Counts(10, 0, 0, 5))):
        config = with_metrics_first(
            {
                "input": {"memory": {"topic": topic}},
                "output": {"null": {}, "middlewares": middlewares},
            }
        )
        counter = RouteCounter(name)
        reporter = ProgressReporter([counter], interval=0, stream=io.StringIO())
        with Route.from_config(config, name).with_handler(_fail_odd):
            publisher = Publisher.from_config({"memory": {"topic": topic}})
            for n in range(10):
                publisher.send_json({"n": n})
            deadline = time.monotonic() + 30
            while counter.counts().acked < 10 and time.monotonic() < deadline:
                time.sleep(0.001)
        assert counter.counts() == expected
        outcomes = metrics_snapshot()[name]["route"]["delivery"]
        assert outcomes["dropped" if expected.dropped else "dead_lettered"] >= 5
        summary = io.StringIO()
        reporter.summary(summary)
        failed = "5 dropped" if expected.dropped else "5 dead-lettered"
        assert f"msg/s); {failed}\n" in summary.getvalue()
        assert reporter.dropped() == ({name: 5} if expected.dropped else {})


def test_finish_ends_the_live_line_once() -> None:
    name = f"finish-{uuid.uuid4().hex[:8]}"
    terminal = Terminal()
    reporter = ProgressReporter([RouteCounter(name)], interval=0, stream=terminal)
    reporter.tick()
    reporter.finish()
    reporter.finish()
    reporter.summary(io.StringIO())
    assert terminal.getvalue().endswith("\n") and terminal.getvalue().count("\n") == 1


def test_counts_start_from_zero_for_a_reused_route_name() -> None:
    name = f"reused-{uuid.uuid4().hex[:8]}"
    _route_through_memory(name, 30)
    counter = RouteCounter(name)
    assert counter.counts() == Counts()
    _route_through_memory(name, 20)
    assert counter.counts() == Counts(acked=20)


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
