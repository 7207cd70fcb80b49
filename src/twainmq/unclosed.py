"""Closing the files of a producer or consumer that is collected without ``close()``.

Like an unclosed file of the standard library, such an object closes its files when the
garbage collector takes it and emits a ``ResourceWarning``. The finalizer is attached to the
producer or consumer but holds only what owns the files (the ``OpenTopic``, the consumer's
readers, the fsync thread), never the object itself: it runs only once that object is
unreachable, so never on one still in use, and ``close()`` detaches it, so the engine's own
close logic never runs twice. It does not run at interpreter exit (the process's files close
then anyway, and threads may still be using the object).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Mapping

from .fsync_batcher import FsyncBatcher
from .reader import PartitionReader
from .topic import OpenTopic


def watch(
    owner: object,
    what: str,
    topic: OpenTopic,
    readers: Mapping[int, PartitionReader] | None = None,
    batcher: FsyncBatcher | None = None,
) -> weakref.finalize:
    """Close ``topic``'s files (and ``readers``', and stop ``batcher``) if ``owner`` is
    collected first; the caller's ``close()`` must ``detach()`` the returned finalizer."""
    finalizer = weakref.finalize(owner, _release_files, what, topic, readers, batcher)
    finalizer.atexit = False
    return finalizer


def _release_files(
    what: str,
    topic: OpenTopic,
    readers: Mapping[int, PartitionReader] | None,
    batcher: FsyncBatcher | None,
) -> None:
    if batcher is not None:
        batcher.cancel()
    if readers is not None:
        for reader in list(readers.values()):
            reader.close()
    topic.close()
    # Warn last: a filter turning warnings into errors must not leave the files open.
    warnings.warn(
        f"unclosed {what} of topic {topic.name!r}: its files were closed by the garbage "
        "collector; call close() or use it as a context manager",
        ResourceWarning,
        stacklevel=2,
    )
