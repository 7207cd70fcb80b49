"""Member files: a live member holds its file locked, and touches it as a heartbeat.

Anyone can tell a member's condition without asking it:

- ``DEAD``: the lock is free (the kernel released it: the process exited or
  was killed) or the file is gone;
- ``HUNG``: the lock is held but the file's mtime is older than the session
  timeout (the process lives but stopped polling);
- ``ALIVE``: otherwise.
"""

from __future__ import annotations

import enum
import json
import os
import secrets
import socket
import time
from typing import Any

from twainmq.errors import raise_storage_error, short_write
from twainmq.groups.layout import GroupPaths
from twainmq.groups.locking import try_lock


class MemberStatus(enum.Enum):
    """What another process can observe about a member."""

    ALIVE = "alive"
    HUNG = "hung"
    DEAD = "dead"


def new_member_id() -> str:
    """A member id unique across processes and threads: pid plus random bits."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


class MemberFile:
    """This member's own file, locked for as long as the member lives."""

    def __init__(self, paths: GroupPaths, member_id: str) -> None:
        self.path = paths.member(member_id)
        self.info: dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "joined_at": time.time(),
        }
        # Locked before anyone can learn the id from state.json, so no
        # observer ever sees this member's file unlocked while it lives.
        fd = try_lock(self.path)
        if fd is None:
            raise RuntimeError(f"member file {self.path} is already locked")
        self._fd: int | None = fd
        try:
            self._write_info(json.dumps(self.info).encode())
        except BaseException:
            self.release()  # not joined: the file goes
            raise

    def _write_info(self, data: bytes) -> None:
        assert self._fd is not None
        try:
            written = os.write(self._fd, data)
        except OSError as error:
            raise_storage_error(error, self.path, "writing the member file")
        if written != len(data):  # a full disk: StorageFullError, retriable
            raise short_write(self.path, "writing the member file", written, len(data))

    def heartbeat(self) -> None:
        """Mark this member as making progress (sets the file's mtime to now)."""
        if self._fd is not None:
            os.utime(self._fd)

    def release(self) -> None:
        """Remove the file and drop the lock: the member is gone."""
        if self._fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass  # already removed by a member that expelled us
        os.close(self._fd)
        self._fd = None


def member_status(paths: GroupPaths, member_id: str, session_timeout: float) -> MemberStatus:
    """Observe another member through its file, without disturbing it."""
    try:
        fd = try_lock(paths.member(member_id), create=False)
    except FileNotFoundError:
        return MemberStatus.DEAD
    if fd is not None:
        os.close(fd)
        return MemberStatus.DEAD
    try:
        age = time.time() - os.stat(paths.member(member_id)).st_mtime
    except FileNotFoundError:
        return MemberStatus.DEAD
    return MemberStatus.HUNG if age > session_timeout else MemberStatus.ALIVE


def joiner_info(paths: GroupPaths, member_id: str) -> dict[str, Any] | None:
    """What a live member wrote in its file (pid, host, joined_at), or None if nobody holds
    it (dead, gone, or created a moment ago and not locked yet: it joins by itself)."""
    try:
        fd = try_lock(paths.member(member_id), create=False)
    except FileNotFoundError:
        return None
    if fd is not None:
        os.close(fd)  # never delete it here: its creator may be about to lock it
        return None
    try:
        info = json.loads(paths.member(member_id).read_bytes())
    except (OSError, ValueError):
        info = None
    if not isinstance(info, dict):  # locked, not written yet
        pid = member_id.split("-", 1)[0]
        info = {"pid": int(pid)} if pid.isdigit() else {}
    return info


def remove_member_file(paths: GroupPaths, member_id: str) -> None:
    """Delete a departed member's file (its holder, if any, keeps an orphaned lock)."""
    try:
        os.unlink(paths.member(member_id))
    except FileNotFoundError:
        pass
