"""Where a consumer group of one file has acknowledged up to: ``<path>.<group_id>.offset``."""

from __future__ import annotations

import json
from pathlib import Path

from mq_bridge.endpoints.kit.atomic_files import replaced_atomically
from mq_bridge.errors import EndpointError

__all__ = ["GroupProgress"]


class GroupProgress:
    """Where a consumer group of one file has acknowledged up to (see the module docstring)."""

    def __init__(self, data_path: Path, group_id: str) -> None:
        self.group_id = group_id
        self.path = data_path.with_name(f"{data_path.name}.{group_id}.offset")

    def load(self) -> int | None:
        """The stored offset, or None when the group has no progress yet."""
        try:
            offset = json.loads(self.path.read_bytes())["offset"]
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as error:
            raise EndpointError(f"group progress file {self.path} is unreadable: {error}") from None
        if type(offset) is not int or offset < 0:
            raise EndpointError(f"group progress file {self.path} holds a bad offset {offset!r}")
        return offset

    def save(self, offset: int) -> None:
        """Store `offset` durably (the file is replaced atomically, see `replaced_atomically`)."""
        with replaced_atomically(self.path) as file:
            file.write(json.dumps({"offset": offset, "group_id": self.group_id}).encode())
