"""The file endpoint's atomic replacement (group progress, deleting acked records): the kit's
`replaced_atomically`."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mq_bridge.endpoints.file.progress import GroupProgress
from mq_bridge.endpoints.kit import atomic_files as atomic
from mq_bridge.endpoints.kit.atomic_files import replaced_atomically


def test_a_failed_replacement_leaves_the_old_content_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), replaced_atomically(path) as file:
        file.write(b"half of the new")
        raise RuntimeError("crash in the middle")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["data"]


def test_the_new_content_and_the_directory_are_synced_before_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        events.append("replace")
        real_replace(source, target)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    progress = GroupProgress(tmp_path / "log", "g")
    progress.save(42)
    assert events == ["fsync-file", "replace", "fsync-dir"]
    assert progress.load() == 42


def test_two_threads_replacing_one_file_at_once_both_succeed_and_one_wins_whole(
    tmp_path: Path,
) -> None:
    """Each thread has its own temporary file: with one name per process, the second open
    would truncate the first's file and the second rename would find nothing to rename."""
    path = tmp_path / "progress"
    path.write_bytes(b"old")
    contents = [b"a" * 100_000, b"b" * 100_000]
    both_written = threading.Barrier(2, timeout=10.0)
    errors: list[BaseException] = []

    def replace(content: bytes) -> None:
        try:
            with replaced_atomically(path) as file:
                file.write(content)
                both_written.wait()  # both temporary files are open and written at once
        except BaseException as error:
            errors.append(error)

    writers = [threading.Thread(target=replace, args=(content,)) for content in contents]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(10.0)
    assert errors == []
    assert path.read_bytes() in contents
    assert os.listdir(tmp_path) == ["progress"]
