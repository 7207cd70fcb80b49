"""Atomic file writes: a failed write leaves the old file whole, and a durable write is synced."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from twainmq.atomic_files import read_json, write_file_atomically, write_json_atomically
from twainmq.groups.commits import read_commits, write_commits
from twainmq.groups.layout import GroupPaths


def leftovers(directory: Path) -> list[str]:
    """Temporary files a write left in ``directory``."""
    return [name for name in os.listdir(directory) if name.endswith(".tmp")]


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "state.json"
    write_json_atomically(path, {"generation": 1})
    return path


def test_a_write_replaces_the_whole_file_and_leaves_no_temporary_file(old_file: Path) -> None:
    write_json_atomically(old_file, {"generation": 2, "members": {}})
    assert read_json(old_file) == {"generation": 2, "members": {}}
    assert old_file.read_text() == json.dumps({"generation": 2, "members": {}}, indent=1)
    assert leftovers(old_file.parent) == []


def test_a_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert read_json(tmp_path / "absent.json") is None


def test_a_document_that_cannot_be_serialized_leaves_the_old_file(old_file: Path) -> None:
    with pytest.raises(TypeError):
        write_json_atomically(old_file, {"generation": object()})
    assert read_json(old_file) == {"generation": 1}
    assert leftovers(old_file.parent) == []


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_write_failing_midway_leaves_the_old_file(
    old_file: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    def fail(*args: object) -> None:
        raise OSError(5, f"simulated {failing} failure")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError, match=f"simulated {failing} failure"):
        write_json_atomically(old_file, {"generation": 2})
    monkeypatch.undo()
    assert read_json(old_file) == {"generation": 1}
    assert leftovers(old_file.parent) == []


def record_syncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Log every os.fsync (of a "file" or a "directory") and os.replace, in order."""
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    def replace(source: Path, target: Path) -> None:
        events.append("replace")
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def test_a_durable_write_syncs_the_data_before_the_rename_and_the_directory_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = record_syncs(monkeypatch)
    write_json_atomically(tmp_path / "state.json", {"generation": 1})
    assert events == ["file", "replace", "directory"]


def test_fsync_false_syncs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = record_syncs(monkeypatch)
    write_json_atomically(tmp_path / "state.json", {"generation": 1}, fsync=False)
    assert events == ["replace"]


def test_an_exclusive_write_creates_once_and_never_replaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.twc"
    events = record_syncs(monkeypatch)
    write_file_atomically(path, b"first\n", exclusive=True)
    assert events == ["file", "directory"]  # linked into place, not renamed over anything
    with pytest.raises(FileExistsError):
        write_file_atomically(path, b"second\n", exclusive=True)
    assert path.read_bytes() == b"first\n"
    assert leftovers(tmp_path) == []


def test_a_group_commit_log_is_created_whole_and_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Created exclusively (os.link, no replace), fsynced even when commits are not: it is
    # created once, and a power cut must not lose the group's first commits with it.
    paths = GroupPaths.of(tmp_path, "events", "billing")
    events = record_syncs(monkeypatch)
    write_commits(paths, {0: 42}, durable=False)
    assert events == ["file", "directory"]
    assert read_commits(paths) == {0: 42}
