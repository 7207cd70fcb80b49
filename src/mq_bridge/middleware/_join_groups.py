"""The groups of a weak join: when one is complete, and the message it becomes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mq_bridge.message import Message
from mq_bridge.middleware._ordered_acks import Pending


@dataclass(frozen=True)
class JoinRule:
    """What makes a group and when it is complete (the weak_join options)."""

    group_by: str
    expected_count: int
    timeout: float
    branch_by: str | None = None
    required: frozenset[str] = frozenset()
    discard_on_timeout: bool = False

    def is_member(self, message: Message) -> bool:
        """In branch mode a message must name its branch to join a group."""
        return self.branch_by is None or message.get(self.branch_by) is not None

    def is_complete(self, group: JoinGroup) -> bool:
        if self.branch_by is None:
            return len(group.members) >= self.expected_count
        branches = group.branches(self.branch_by)
        if self.required:
            return self.required <= branches
        return len(branches) >= self.expected_count


class JoinGroup:
    """The members held for one `group_by` value, each with the inner batch it came in."""

    def __init__(self, key: str, deadline: float) -> None:
        self.key = key
        self.deadline = deadline
        self.members: list[tuple[Message, Pending]] = []

    def add(self, message: Message, source: Pending) -> None:
        self.members.append((message, source))

    def sources(self) -> list[Pending]:
        """One entry per member: the inner batch to settle when the member is done."""
        return [source for _, source in self.members]

    def branches(self, branch_by: str) -> set[str]:
        return {message.get(branch_by) or "" for message, _ in self.members}

    def drop_sources(self, failed: set[Pending]) -> bool:
        """Forget members from `failed` batches (they come again); True if any remain."""
        self.members = [(m, source) for m, source in self.members if source not in failed]
        return bool(self.members)

    def joined(self, rule: JoinRule, complete: bool) -> Message:
        """The one message the group becomes."""
        messages = [message for message, _ in self.members]
        data: Any
        if rule.branch_by is None:
            data = [member_value(m) for m in messages]
        else:
            data = {m.get(rule.branch_by) or "": member_value(m) for m in messages}
        metadata = messages[0].metadata
        metadata.update(
            {
                rule.group_by: self.key,
                "mqb.join.count": str(len(messages)),
                "mqb.join.complete": "true" if complete else "false",
            }
        )
        return Message.from_json(data, metadata)


def member_value(message: Message) -> Any:
    """A member's payload as it goes into the joined JSON: its JSON value, else its text."""
    try:
        return message.json()
    except ValueError:
        return message.payload.decode("utf-8", errors="replace")
