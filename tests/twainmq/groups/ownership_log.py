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


def check_log(path: Path) -> LogCheck:
    """Replay the log in order: a partition must never have two holders, and
    every message must be processed by the partition's holder.

    ``K <pid>`` lines (written by the test while that process is stopped,
    just before killing it) end all of that process's holdings.
    """
    result = LogCheck()
    holder: dict[int, int] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        kind, pid, *rest = line.split()
        who = int(pid)
        if kind == "K":
            holder = {p: h for p, h in holder.items() if h != who}
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
    return result


def missing_messages(check: LogCheck, end_offsets: dict[int, int]) -> list[tuple[int, int]]:
    """Every (partition, offset) below the end that nobody processed."""
    return [
        (p, o)
        for p, end in end_offsets.items()
        for o in range(end)
        if (p, o) not in check.processed
    ]
