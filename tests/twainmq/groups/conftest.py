"""Helpers shared by the consumer-group tests."""

from twainmq.groups import GroupMember


def sync(member: GroupMember) -> None:
    """What a consumer does on poll: release what was lost, take what was gained."""
    if member.refresh():
        member.release(member.revocations())
        member.acquire_pending()
