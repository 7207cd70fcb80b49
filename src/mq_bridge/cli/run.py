"""mq-bridge run CONFIG: run the routes of a config file in the foreground.

    mq-bridge run bridge.yaml                              every route of the file
    mq-bridge run bridge.yaml --route orders --handler orders=shop.handlers:enrich
    mq-bridge run bridge.yaml --handler handlers.py:KINDS --stop-when-idle 2

It runs until every input is exhausted (bounded inputs such as a file in consume
mode), until --stop-when-idle seconds pass without a new message and with no batch in
flight, or until SIGINT / SIGTERM (which finish and acknowledge what is in flight).
Progress (totals and messages/s per route) goes to stderr; a summary to stdout at the
end. A route with no --handler forwards its messages unchanged, and says so first.

A message is acknowledged only once its output took it (docs/delivery.md): a broker
that is away is waited for, with backoff. A handler's NonRetryableError is dead-lettered
by a dlq middleware, or dropped (logged, counted in the summary); any other handler error
is dead-lettered, or redelivered with backoff where the input can redeliver, else dropped
(the route option on_error: drop drops it everywhere).

Exit status: 0 when every message was delivered or dead-lettered; 3 when the run ended
but dropped messages; 1 on an error; 2 on a usage error; 130 on a second Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from mq_bridge.cli.config_file import load_routes
from mq_bridge.cli.console import add_observability_options, observability
from mq_bridge.cli.handlers import attach_handlers, parse_handler_spec
from mq_bridge.cli.progress import ProgressReporter, RouteCounter, with_metrics_first
from mq_bridge.cli.supervisor import supervise
from mq_bridge.errors import ConfigError
from mq_bridge.route import Route

__all__ = ["EXIT_DROPPED", "add_parsers", "configure_logging", "run_routes"]

_LOG_LEVELS = ("debug", "info", "warn", "error", "off")

#: The exit status of a run that ended but dropped messages (non-retriable failures).
EXIT_DROPPED = 3


def add_parsers(subparsers: Any) -> None:
    run = subparsers.add_parser(
        "run",
        help="run the routes of a config file until stopped or their inputs are exhausted",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("config", help="a YAML or JSON config file")
    run.add_argument(
        "--route", action="append", dest="routes", metavar="NAME",
        help="run only this route (repeat for several; default: every route)",
    )  # fmt: skip
    run.add_argument(
        "--handler", action="append", default=[], type=parse_handler_spec,
        metavar="[ROUTE=]TARGET",
        help="a Python handler: MODULE:FUNCTION or FILE.py:FUNCTION (a function, or a "
        "dict of kind -> function); ROUTE= limits it to one route (default: every route)",
    )  # fmt: skip
    run.add_argument(
        "--stop-when-idle", type=_seconds, metavar="SECONDS",
        help="stop cleanly once no route got a new message for this long (a batch still "
        "being handled or sent keeps its route busy)",
    )  # fmt: skip
    add_output_options(run, quiet_help="print nothing but errors (the exit status still tells)")
    add_observability_options(run)
    run.set_defaults(run=run_routes)


def add_output_options(
    parser: argparse.ArgumentParser, quiet_help: str = "no progress lines"
) -> None:
    """Options shared by the commands that run routes (`run`, `demo`)."""
    parser.add_argument(
        "--progress-interval", type=_seconds, default=1.0, metavar="SECONDS",
        help="how often progress is shown on stderr (default 1)",
    )  # fmt: skip
    parser.add_argument("-q", "--quiet", action="store_true", help=quiet_help)
    parser.add_argument(
        "--log-level", choices=_LOG_LEVELS, default=None,
        help="the bridge's log events shown on stderr (default warn; or $MQ_BRIDGE_LOG)",
    )  # fmt: skip


def run_routes(args: argparse.Namespace) -> int:
    # -q: nothing but errors, so the bridge's warnings too unless a level is asked for.
    configure_logging(args.log_level or ("error" if args.quiet else None))
    routes = {
        config["name"]: Route(with_metrics_first(config))
        for config in load_routes(args.config, args.routes)
    }
    handled = attach_handlers(routes, args.handler)
    if not args.quiet:
        _warn_about_routes_without_handler([name for name in routes if name not in handled])
    reporter = ProgressReporter(
        [RouteCounter(name) for name in routes], args.progress_interval, quiet=args.quiet
    )
    try:
        with observability(args):
            reason = supervise(routes, reporter, stop_when_idle=args.stop_when_idle)
    finally:
        reporter.finish()  # an error line, too, must not land on the progress line
    if not args.quiet:
        print(f"stopped: {reason}", file=sys.stderr)
        reporter.summary(sys.stdout)
    return _exit_status(reporter.dropped())


def _warn_about_routes_without_handler(names: list[str]) -> None:
    for name in names:
        print(
            f"mq-bridge: warning: route {name!r} has no handler: it forwards every message "
            "unchanged to its output (give one with --handler)",
            file=sys.stderr,
            flush=True,
        )


def _exit_status(dropped: dict[str, int]) -> int:
    """0, or `EXIT_DROPPED` after an error line saying which routes dropped how many."""
    if not dropped:
        return 0
    total = sum(dropped.values())
    where = ", ".join(f"route {name!r}: {count:,}" for name, count in dropped.items())
    print(
        f"mq-bridge: error: {total:,} message{'s' if total != 1 else ''} dropped ({where}): "
        "the handler or the output failed for good (the warnings name them; a dlq middleware "
        f"keeps them); exit status {EXIT_DROPPED}",
        file=sys.stderr,
    )
    return EXIT_DROPPED


def configure_logging(level: str | None) -> None:
    """Show the bridge's log events at `level` on stderr, once per process."""
    chosen = (level or os.environ.get("MQ_BRIDGE_LOG") or "warn").lower()
    numeric = {"off": logging.CRITICAL + 1, "warn": logging.WARNING}.get(chosen)
    if numeric is None:
        numeric = getattr(logging, chosen.upper(), None)
    if not isinstance(numeric, int):
        raise ConfigError(f"unknown log level {chosen!r}; use one of {', '.join(_LOG_LEVELS)}")
    logger = logging.getLogger("mq_bridge")
    logger.setLevel(numeric)
    if not any(isinstance(handler, _StderrHandler) for handler in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("mq-bridge: %(levelname)s: %(message)s"))
        logger.addHandler(handler)


class _StderrHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is at the time (tests swap it), not the one at start."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must not be negative")
    return value
