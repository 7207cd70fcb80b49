"""file: messages as delimited records in a local file (see `codec` for the layout).

Features
    - Formats `normal` (JSON envelope with id, metadata, payload; the default), `json`
      (envelope with the payload as a JSON value), `text`, `raw` (payload bytes only), and
      mq-bridge's aliases (`envelope`, `envelope_json`, `envelope_text`, `payload`).
    - Output: parent directories are created and the file stays open. Every send returns
      once its records are written to the file (visible to readers, safe if the process
      dies): a batch (`send`, what routes and `send_batch` use) with one `write`, a single
      `Publisher.send` with one `write` of its own. Opt-in write-behind: with `linger_ms`
      above 0 (Kafka's word), single sends are buffered for at most that long (or 64 KiB)
      and written together; after a `kill -9` the last few milliseconds of them may be
      missing unless `flush()` returned. `fsync` decides when written data is forced to
      disk (a power loss, not a process crash).
    - Input modes: `consume` (from the start; `exhausted` turns true once everything up to
      the end of the file has been handed out), `subscribe` (tail from the end),
      `group_subscribe` (from the group's stored progress; `ack` saves it atomically).
      `delete: true` (consume/subscribe) removes acknowledged records from the file.
    - A record is complete only once its delimiter is written: an unterminated last record
      (a torn write, or one still being written) is never delivered; it is reported in
      `status()` and, in `consume` mode, does not hold back `exhausted`. A publisher that
      opens a file ending in such a fragment first terminates it, so a new record never
      glues onto it. Records that cannot be decoded are logged and skipped.
    - A send the disk refuses (full: ENOSPC, EDQUOT, a short write; failing: EIO) raises
      `FileStorageError` (retriable, also an `OSError`) and is taken back: the file is cut
      to where that send began, so nothing of it is left for the next send to glue onto.
    - `nack` rewinds to the nacked batch: it and everything after it is delivered again.
    - `raw` records carry no id: theirs is derived from the file and the byte offset, so a
      redelivered record keeps its id. ``MQB_SOURCE_METADATA=1`` adds
      ``mqb.src.file_path`` and ``mqb.src.file_offset``. A file cut below what was read
      shows as unhealthy in `status()`.

URL
    none: the `path` option names the file.

Options (declared in `options.py`, `FileOptions`)
    path              the file (required)
    format            normal | json | text | raw (default normal)
    delimiter         record delimiter: text, or hex such as "0x00" (default "\\n")
    mode              input: consume | subscribe | group_subscribe (default consume)
    delete            input (consume, subscribe): remove acknowledged records (default false)
                      Rewrites the file: only safe when nothing else appends meanwhile.
    group_id          input (group_subscribe): names the progress file <path>.<group_id>.offset
    read_from_tail    input (group_subscribe): with no stored progress, start at the end
    fsync             output: off (default; the OS flushes) | batch (every write of a batch
                      or of the buffer) | periodic (at most every fsync_interval_ms, and on
                      flush/close) | always (every send, single ones too, written and synced
                      before it returns; the slowest)
    fsync_interval_ms output: for `periodic` (default 1000)
    linger_ms         output: opt-in write-behind: how long single sends may wait in a
                      buffer (default 0: each is written before `send` returns)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.file.options import FileOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.file.input import FileInput
    from mq_bridge.endpoints.file.output import FileOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = FileOptions


def build_output(options: FileOptions, context: BuildContext) -> FileOutput:
    """A publisher endpoint appending to `path`."""
    from mq_bridge.endpoints.file.output import FileOutput

    return FileOutput(options)


def build_input(options: FileOptions, context: BuildContext) -> FileInput:
    """A consumer endpoint reading `path` in the configured mode."""
    from mq_bridge.endpoints.file.input import FileInput

    return FileInput(options, context.source_metadata)
