"""The ``mq-bridge`` command: run, check and try out bridge configs from a shell.

    mq-bridge run CONFIG [--route NAME ...] [--handler [ROUTE=]MODULE:FUNCTION ...]
    mq-bridge validate CONFIG          every problem of every route, publisher, consumer
    mq-bridge schema                   the JSON Schema (for yaml-language-server)
    mq-bridge send CONFIG --publisher NAME [--json] [MESSAGE ...]    (stdin without any)
    mq-bridge consume CONFIG --consumer NAME [--max N] [--follow]
    mq-bridge demo                     a durable pipeline on the embedded twainmq log
    mq-bridge console --root DIR       the web console over a twainmq store

Errors print one line, ``mq-bridge: error: ...``, and exit 1; usage errors exit 2; Ctrl-C
exits 130 (``run`` treats the first Ctrl-C or SIGTERM as "stop cleanly"). ``run`` exits 3
when it dropped messages (``EXIT_DROPPED``). No traceback reaches the user;
``MQ_BRIDGE_DEBUG=1`` shows one for an internal error.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Callable, Sequence

from mq_bridge.errors import MQBridgeError

__all__ = ["build_parser", "fail", "main"]

#: Modules that add subcommands; each has ``add_parsers(subparsers)`` and sets ``run`` on
#: its parsers via ``set_defaults(run=...)``.
_COMMAND_MODULES = ("run", "checks", "messages", "demo", "console")

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="mq-bridge",
        description="Run and try out mq_bridge routes, publishers and consumers.",
        epilog="Exit status: 0 done; 1 error; 2 usage error; 3 run dropped messages (a "
        "handler or output failed for good); 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"mq-bridge {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"mq_bridge.cli.{name}")
        module.add_parsers(subparsers)
    return parser


def package_version() -> str:
    """The installed distribution's version (the source's when it is not installed)."""
    try:
        return importlib.metadata.version("twainmq")  # one distribution holds both packages
    except importlib.metadata.PackageNotFoundError:
        from mq_bridge import __version__

        return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used as the console script)."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    _take_trailing_positionals(parser, args, extras)
    run: Command = args.run
    try:
        return run(args)
    except MQBridgeError as error:
        return fail(str(error))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `mq-bridge consume ... | head`
        _silence_stdout()
        return 0
    except OSError as error:
        return fail(f"{error.strerror or error}: {error.filename or ''}".rstrip(": "))
    except Exception as error:  # a bug (ours or a handler's): one line unless asked
        if os.environ.get("MQ_BRIDGE_DEBUG"):
            raise
        return fail(
            f"internal error {type(error).__name__}: {error} (MQ_BRIDGE_DEBUG=1 shows more)"
        )


def _take_trailing_positionals(
    parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]
) -> None:
    """argparse assigns every positional at its first run of them, so in
    ``send CONFIG --json MSG`` the MSG is left over; a command that names a list in
    ``trailing`` (``set_defaults(trailing="messages")``) gets such leftovers appended."""
    trailing = getattr(args, "trailing", None)
    unknown = [extra for extra in extras if extra.startswith("-") and extra != "-"]
    if unknown or (extras and trailing is None):
        parser.error(f"unrecognized arguments: {' '.join(unknown or extras)}")
    if extras and trailing is not None:
        setattr(args, trailing, [*getattr(args, trailing), *extras])


def fail(message: str) -> int:
    """Print the error to stderr (a ConfigError may add indented problem lines); return 1."""
    print(f"mq-bridge: error: {message}", file=sys.stderr)
    return 1


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
