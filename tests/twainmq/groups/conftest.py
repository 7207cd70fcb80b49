"""Helpers shared by the consumer-group tests."""

import time
from collections.abc import Callable

from twainmq.groups import GroupMember


def sync(member: GroupMember) -> None:
    """What a consumer does on poll: release what was lost, take what was gained."""
    if member.refresh():
        member.release(member.revocations())
        member.acquire_pending()


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, step: float = 0.002) -> float:
    """Poll ``condition`` until true; return the seconds it took. Fails after ``timeout``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(step)
    return time.monotonic() - start
