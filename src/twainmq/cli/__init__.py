"""The ``twainmq`` command: manage topics, produce and consume from a shell.

    twainmq [--root DIR] list | create | describe | check | delete | produce | consume | groups
                         | demo

The store directory comes from ``--root``, else ``$TWAINMQ_ROOT``, else ``./twain-data``;
only ``create`` makes it (see ``store.py``). Errors print one line naming what was wrong
and exit 1; usage errors exit 2; Ctrl-C and SIGTERM stop a command the same way (``produce``
says how many lines it wrote) and exit 130. No traceback reaches the user
(``TWAINMQ_DEBUG=1`` shows one for an internal error).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from twainmq.cli.store import resolve_root
from twainmq.errors import TwainMQError

#: Modules that add subcommands; each has ``add_parsers(subparsers)`` and sets ``run`` on
#: its parsers via ``set_defaults(run=...)``.
_COMMAND_MODULES = ("topics", "messages", "groups", "check", "demo")

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="twainmq",
        description="An embedded, durable, partitioned message log. Only create makes a "
        "missing store directory; the other commands say it does not exist.",
    )
    parser.add_argument(
        "--root", metavar="DIR", help="the store directory (default: $TWAINMQ_ROOT or ./twain-data)"
    )
    parser.add_argument("--version", action="version", version=f"twainmq {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"twainmq.cli.{name}")
        module.add_parsers(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used as the console script)."""
    args = build_parser().parse_args(argv)
    resolve_root(args)
    _show_warnings()
    run: Command = args.run
    try:
        with _sigterm_as_interrupt():
            return run(args)
    except TwainMQError as error:
        return fail(str(error))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `twainmq consume t | head`
        _silence_stdout()
        return 0
    except OSError as error:
        return fail(f"{error.strerror or error}: {error.filename or ''}".rstrip(": "))
    except Exception as error:  # a bug of ours: one line, the traceback only on request
        if os.environ.get("TWAINMQ_DEBUG"):
            raise
        return fail(f"internal error {type(error).__name__}: {error} (TWAINMQ_DEBUG=1 shows more)")


def package_version() -> str:
    """The installed distribution's version (the source's when it is not installed)."""
    try:
        return importlib.metadata.version("twainmq")
    except importlib.metadata.PackageNotFoundError:
        from twainmq import __version__

        return __version__


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a service manager, a timeout) stops the command as Ctrl-C does:
    the same way out, the same words, exit 130."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread (main() called from a thread)
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:  # None: a handler not set from Python, which cannot be put back
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


class _StderrWarnings(logging.Handler):
    """The engine's warnings (``on_gap="skip"``) as ``twainmq: warning: ...`` lines on the
    stderr of the moment (a handler bound to one stream would outlive it in tests)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"twainmq: warning: {record.getMessage()}", file=sys.stderr)


def _show_warnings() -> None:
    engine = logging.getLogger("twainmq")
    if not any(isinstance(h, _StderrWarnings) for h in engine.handlers):
        engine.addHandler(_StderrWarnings(logging.WARNING))


def fail(message: str) -> int:
    """Print one error line to stderr; return the exit code for errors."""
    print(f"twainmq: error: {message}", file=sys.stderr)
    return 1


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
