"""Reading the shared event log written by group_worker.py, and checking it."""

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class LogCheck:
    """What the event log proves."""

    violations: list[str] = field(default_factory=list)
    processed: dict[tuple[int, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    last_commit: dict[tuple[int, int], int] = field(default_factory=dict)  # (pid, p) -> offset
    handovers: int = 0
    holders: dict[int, int] = field(default_factory=dict)  # partition -> pid, at the end


def check_log(path: Path) -> LogCheck:
    """Replay the log in order: a partition must never have two holders, and
    every message must be processed by the partition's holder.

    ``K <pid>`` lines (written by the test while that process is stopped,
    just before killing it) and ``X <pid>`` lines (written while it is stopped
    long enough to be expelled) end all of that process's holdings. After
    ``X``, the process's lines until its ``J`` (joined again) are leftovers of
    its fenced membership, written late because it was frozen mid-way: they
    are not counted (its commits there are refused, see F lines).
    """
    result = LogCheck()
    holder: dict[int, int] = {}
    fenced: set[int] = set()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        kind, pid, *rest = line.split()
        who = int(pid)
        if kind == "J":
            fenced.discard(who)
        if kind in ("K", "X"):
            holder = {p: h for p, h in holder.items() if h != who}
            fenced.add(who)
        if kind in ("F", "J", "K", "X") or who in fenced:
            continue
        partition = int(rest[0])
        if kind == "A":
            if partition in holder:
                result.violations.append(
                    f"line {number}: {who} took {partition} held by {holder[partition]}"
                )
            holder[partition] = who
            result.handovers += 1
        elif kind == "R":
            if holder.get(partition) == who:
                del holder[partition]
        elif kind == "M":
            if holder.get(partition) != who:
                result.violations.append(
                    f"line {number}: {who} read {partition} held by {holder.get(partition)}"
                )
            result.processed[(partition, int(rest[1]))].append(who)
        elif kind == "C":
            result.last_commit[(who, partition)] = int(rest[1])
    result.holders = holder
    return result


def missing_messages(check: LogCheck, end_offsets: dict[int, int]) -> list[tuple[int, int]]:
    """Every (partition, offset) below the end that nobody processed."""
    return [
        (p, o)
        for p, end in end_offsets.items()
        for o in range(end)
        if (p, o) not in check.processed
    ]
