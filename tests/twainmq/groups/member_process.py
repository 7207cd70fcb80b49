"""A group member in its own process, for tests: joins, keeps its partitions in sync.

Usage: python member_process.py ROOT TOPIC GROUP PARTITIONS
Prints "owned <sorted partitions>" each time its ownership changes, flushed.
"""

import sys
import time

from twainmq.groups import GroupMember, GroupPaths, GroupSettings


def main() -> None:
    root, topic, group, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    member = GroupMember(GroupPaths.of(root, topic, group), partitions, GroupSettings())
    last = None
    while True:
        if member.refresh():
            member.release(member.revocations())
            member.acquire_pending()
        owned = sorted(member.owned())
        if owned != last:
            print("owned", " ".join(map(str, owned)), flush=True)
            last = owned
        time.sleep(0.001)


if __name__ == "__main__":
    main()
