"""mq-bridge console: the web console over a twainmq store; and the observability options
``mq-bridge run`` shares (``--metrics-port``, ``--console-port``, ``--store``, ``--tracing``).

    mq-bridge console --root DIR [--port 8470] [--host 127.0.0.1] [--allow-actions [--token T]]
                      [--allowed-host NAME[:PORT] ...]
    mq-bridge run CONFIG --metrics-port 9464 --console-port 8470 --store DIR --tracing

The console is read-only unless --allow-actions (group offset resets); listening beyond
loopback with actions enabled needs a token (--token or $MQ_BRIDGE_CONSOLE_TOKEN), which
each action must carry. It answers only requests sent to one of its names (the Host
header: localhost, 127.0.0.1, [::1] or the address it listens on, with its port; more
with --allowed-host), so that a web page cannot reach it through DNS rebinding. See
docs/console.md and docs/metrics.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mq_bridge.errors import ConfigError

__all__ = ["add_observability_options", "add_parsers", "observability", "run_console"]

DEFAULT_CONSOLE_PORT = 8470
_TOKEN_ENV = "MQ_BRIDGE_CONSOLE_TOKEN"


def add_parsers(subparsers: Any) -> None:
    console = subparsers.add_parser(
        "console",
        help="serve the web console over a twainmq store (topics, messages, groups)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    console.add_argument("--root", required=True, type=Path, help="the twainmq store directory")
    console.add_argument(
        "--port", type=int, default=DEFAULT_CONSOLE_PORT,
        help=f"port to listen on (default {DEFAULT_CONSOLE_PORT}; 0 picks a free one)",
    )  # fmt: skip
    _add_access_options(console, "--host", "--allowed-host")
    console.set_defaults(run=run_console)


def _add_access_options(
    parser: argparse.ArgumentParser, host_flag: str, allowed_host_flag: str
) -> None:
    parser.add_argument(
        host_flag, default="127.0.0.1", dest="console_host",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )  # fmt: skip
    parser.add_argument(
        allowed_host_flag, action="append", default=[], dest="console_allowed_hosts",
        metavar="NAME[:PORT]",
        help="another name the console answers to, as the Host of a request (a proxy's or "
        "this machine's name; without :PORT any port); repeatable. Besides these: "
        "localhost, 127.0.0.1, [::1] and the listening address, with the console's port",
    )  # fmt: skip
    parser.add_argument(
        "--allow-actions", action="store_true",
        help="enable state changes (resetting a group's offsets); read-only without it",
    )  # fmt: skip
    parser.add_argument(
        "--token", default=None,
        help=f"token every action must carry (default ${_TOKEN_ENV}); required with "
        "--allow-actions beyond loopback",
    )  # fmt: skip


def add_observability_options(parser: argparse.ArgumentParser) -> None:
    """``run``'s options for /metrics, the console and tracing."""
    group = parser.add_argument_group("observability")
    group.add_argument(
        "--metrics-port", type=int, metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (see docs/metrics.md)",
    )  # fmt: skip
    group.add_argument(
        "--metrics-host", default="127.0.0.1",
        help="address /metrics listens on (default 127.0.0.1)",
    )  # fmt: skip
    group.add_argument(
        "--console-port", type=int, metavar="PORT",
        help="serve the web console with this run's live routes (see docs/console.md)",
    )  # fmt: skip
    group.add_argument(
        "--store", type=Path, metavar="DIR",
        help="a twainmq store to show in the console and in /metrics (topics, groups)",
    )  # fmt: skip
    group.add_argument(
        "--tracing", action="store_true",
        help="OpenTelemetry spans per message, W3C traceparent carried in metadata "
        "(the global tracer provider; e.g. run under opentelemetry-instrument)",
    )  # fmt: skip
    _add_access_options(group, "--console-host", "--console-allowed-host")  # type: ignore[arg-type]


@contextmanager
def observability(args: argparse.Namespace) -> Iterator[None]:
    """Start what ``run``'s observability options ask for; stop it on the way out."""
    stops: list[Callable[[], None]] = []
    try:
        if getattr(args, "tracing", False):
            from mq_bridge.observability.tracing import enable_tracing

            enable_tracing()
        if getattr(args, "metrics_port", None) is not None:
            stops.append(_serve_metrics(args))
        if getattr(args, "console_port", None) is not None:
            stops.append(_serve_console(args, args.console_port, attached=True))
        yield
    finally:
        for stop in reversed(stops):
            stop()


def _serve_metrics(args: argparse.Namespace) -> Callable[[], None]:
    from mq_bridge.observability.prometheus import metrics_registry, serve_metrics

    roots = [args.store] if args.store is not None else []
    server = serve_metrics(args.metrics_port, args.metrics_host, metrics_registry(roots))
    _say(f"metrics at http://{args.metrics_host}:{server.server_port}/metrics", args)
    return server.shutdown


def _serve_console(args: argparse.Namespace, port: int, attached: bool) -> Callable[[], None]:
    with _naming_the_extra("aiohttp", "the console", "console"):
        from mq_bridge.console import ConsoleServer, ConsoleSettings

    root = getattr(args, "root", None) or getattr(args, "store", None)
    if root is not None and not Path(root).is_dir():
        raise FileNotFoundError(f"no twainmq store at {root}")
    settings = ConsoleSettings(
        store_root=Path(root) if root is not None else None,
        attached=attached,
        allow_actions=args.allow_actions,
        token=args.token or os.environ.get(_TOKEN_ENV) or None,
        host=args.console_host,
        allowed_hosts=tuple(getattr(args, "console_allowed_hosts", None) or ()),
    )
    server = ConsoleServer(settings, port).start()
    mode = "actions enabled" if settings.allow_actions else "read-only"
    _say(f"console at {server.url}/ ({mode})", args)
    return server.stop


@contextmanager
def _naming_the_extra(module: str, what: str, extra: str) -> Iterator[None]:
    """Turn "No module named `module`" (an optional package) into the pip install to run."""
    try:
        yield
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] != module:
            raise
        raise ConfigError(
            f"{what} needs the {module} package: pip install 'twainmq[{extra}]'"
        ) from error


def _say(text: str, args: argparse.Namespace) -> None:
    if not getattr(args, "quiet", False):
        print(f"mq-bridge: {text}", file=sys.stderr, flush=True)


def run_console(args: argparse.Namespace) -> int:
    """Serve the console until Ctrl-C or SIGTERM."""
    import signal

    stop = _serve_console(args, args.port, attached=False)
    done = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop()
    return 0
