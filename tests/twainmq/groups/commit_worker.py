"""A member that commits every partition in each call, forever, for the kill -9 test.

Usage: python commit_worker.py ROOT TOPIC GROUP PARTITIONS FSYNC
Call n commits offset n for every partition it owns (all of them: it is alone), so a
consistent log has every partition at the same offset. Prints "committing" once, flushed.
(A GroupMember, not a consumer: the offsets need not exist in the topic.)
"""

import sys

from twainmq.groups import GroupMember, GroupPaths, GroupSettings
from twainmq.groups.commits import read_commits


def main() -> None:
    root, topic, group, partitions, fsync = sys.argv[1:6]
    paths = GroupPaths.of(root, topic, group)
    member = GroupMember(paths, int(partitions), GroupSettings(commit_fsync=fsync))
    while len(member.owned()) < int(partitions):
        member.refresh()
        member.acquire_pending()
    owned = sorted(member.owned())
    start = max(read_commits(paths).values(), default=0) + 1
    for number in range(start, 1 << 40):
        member.commit({p: number for p in owned})
        if number == start:
            print("committing", flush=True)


if __name__ == "__main__":
    main()
