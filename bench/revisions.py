"""Our own code before and after a change, side by side in one sitting.

    .venv/bin/python bench/revisions.py --base acb1763 --rounds 3 \\
        "mq_bridge_memory.py --scenario route" "mq_bridge_twain.py --runs 1" \\
        "nats_bench.py --scenario route --runs 1"

The base revision is checked out once into a git worktree (``.bench-worktrees/<rev>``,
ignored by git); each round runs every benchmark command once with the base's ``src/`` first
on PYTHONPATH and once with the working tree's, alternating which goes first, in the same
interpreter and venv (same dependencies). Each command prints lines with ``msg/s``; the last
such figure of a run is taken, or, for a command ending in ``:: LABEL`` (a script that prints
several figures on a line, as ``mq_bridge_twain.py`` does), the number after ``LABEL`` on the
last line that has one. Prints every run, then per command the two medians and their ratio
(after / before).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURE = re.compile(r"([\d,._]+)\s*(k|M)?\s*msg/s")


def worktree(revision: str) -> Path:
    """A checkout of `revision` (made once, reused)."""
    path = ROOT / ".bench-worktrees" / revision
    if not (path / "src").is_dir():
        path.parent.mkdir(exist_ok=True)
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(path), revision],
            check=True,
            capture_output=True,
        )
    return path


def figure(output: str, label: str = "") -> float:
    """The last ``N msg/s`` figure printed (``12,345 msg/s``, ``98.7k msg/s``), or the last
    number printed after `label` (``route 123,456``)."""
    if label:
        numbers = re.findall(rf"(?<![\w.]){re.escape(label)} ([\d,]+)", output)
        if not numbers:
            raise ValueError(f"no '{label} N' in the output:\n{output[-2000:]}")
        return float(numbers[-1].replace(",", ""))
    found = FIGURE.findall(output)
    if not found:
        raise ValueError(f"no 'msg/s' figure in the output:\n{output[-2000:]}")
    number, unit = found[-1]
    value = float(number.replace(",", "").replace("_", ""))
    return value * {"": 1, "k": 1e3, "M": 1e6}[unit]


def run(command: str, source: Path) -> float:
    command, _, label = command.partition("::")
    argv = shlex.split(command)
    environment = {**os.environ, "PYTHONPATH": str(source / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / argv[0]), *argv[1:]],
        cwd=ROOT / "bench",
        env=environment,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return figure(done.stdout, label.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("commands", nargs="+", help="a bench/ script and its arguments")
    args = parser.parse_args()
    sides = {"before": worktree(args.base), "after": ROOT}
    results: dict[str, dict[str, list[float]]] = {
        c: {"before": [], "after": []} for c in args.commands
    }
    for round_number in range(args.rounds):
        order = ["before", "after"] if round_number % 2 == 0 else ["after", "before"]
        for command in args.commands:
            for side in order:
                value = run(command, sides[side])
                results[command][side].append(value)
                print(
                    f"round {round_number + 1} {side:6} {command}: {value:,.0f} msg/s", flush=True
                )
    print()
    for command, figures in results.items():
        before, after = (statistics.median(figures[s]) for s in ("before", "after"))
        print(
            f"{command}: before {before:,.0f}, after {after:,.0f} msg/s (medians of "
            f"{args.rounds}); after/before {after / before:.3f}"
        )


if __name__ == "__main__":
    main()
