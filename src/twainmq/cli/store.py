"""The store directory a command works on: from ``--root``, ``$TWAINMQ_ROOT`` or the default.

Only ``create`` makes a missing store; every other command says it does not exist, so a
typo in ``--root`` does not leave an empty directory behind (nor show an empty store).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from twainmq.errors import TwainMQError
from twainmq.twain import Twain

__all__ = ["DEFAULT_ROOT", "StoreDirectoryError", "open_store", "resolve_root"]

DEFAULT_ROOT = "twain-data"


class StoreDirectoryError(TwainMQError):
    """The store directory is missing (for a command that does not create it), is not a
    directory, or cannot be created."""


def resolve_root(args: argparse.Namespace) -> None:
    """Set ``args.root`` and ``args.root_origin`` (which of the three places it came from)."""
    if args.root is not None:
        args.root_origin = "from --root"
    elif os.environ.get("TWAINMQ_ROOT"):
        args.root, args.root_origin = os.environ["TWAINMQ_ROOT"], "from $TWAINMQ_ROOT"
    else:
        args.root, args.root_origin = DEFAULT_ROOT, "the default"


def open_store(args: argparse.Namespace, create: bool = False) -> Twain:
    """The store at ``args.root``; only with `create` is a missing directory made."""
    path = Path(args.root)
    where = f"{args.root} ({args.root_origin})"
    if path.exists() and not path.is_dir():
        raise StoreDirectoryError(f"the store directory {where} is a file, not a directory")
    if not path.exists() and not create:
        raise StoreDirectoryError(
            f"the store directory {where} does not exist; create a topic to make it: "
            f"twainmq --root {args.root} create TOPIC"
        )
    try:
        return Twain(path)
    except OSError as error:
        raise StoreDirectoryError(
            f"cannot create the store directory {where}: {error.strerror or error}"
        ) from None
