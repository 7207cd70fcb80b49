"""The file endpoint's atomic replacement (group progress, deleting acked records)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mq_bridge.endpoints.file import atomic
from mq_bridge.endpoints.file.atomic import replaced_atomically
from mq_bridge.endpoints.file.progress import GroupProgress


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
