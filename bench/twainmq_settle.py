"""How fast a big consumer group settles: members in separate processes, one topic.

For each MEMBERSxPARTITIONS case: start MEMBERS processes; each waits for a common start
time, calls ``consumer(topic, group=...)``, then polls and reports every change of its
assignment with a ``time.monotonic()`` stamp (system-wide on Linux). The group is settled
when the members' latest assignments are disjoint and cover every partition. Reported:
``join``: from the moment the last member called ``consumer()`` (they all call it at once)
to settled; ``returned``: from that moment until the last ``consumer()`` call returned;
``departure``: one member is killed (SIGKILL), and the time until the survivors own every
partition again (disjoint). Medians of --runs.

    .venv/bin/python bench/twainmq_settle.py --cases 2x4 8x64 32x256
    PYTHONPATH=/tmp/before15/src .venv/bin/python bench/twainmq_settle.py --cases 32x256
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from twainmq import Twain

TOPIC = "events"


def member(root: str, start_at: float) -> None:
    """Child: join at ``start_at``, then poll and print assignment changes as JSON lines."""
    tmq = Twain(root)
    while time.monotonic() < start_at:
        time.sleep(0.0005)
    began = time.monotonic()
    consumer = tmq.consumer(TOPIC, group="settle")
    joined = time.monotonic()
    print(json.dumps({"pid": os.getpid(), "began": began, "joined": joined}), flush=True)
    last = None
    while True:
        consumer.poll(timeout=0.001)
        owned = consumer.assignment()
        if owned != last:
            last = owned
            print(json.dumps({"pid": os.getpid(), "at": time.monotonic(), "owned": owned}),
                  flush=True)  # fmt: skip


def settled_at(events: list[dict], pids: set[int], partitions: int, after: float) -> float | None:
    """The first stamp at which the members in ``pids`` own every partition exactly once."""
    latest: dict[int, list[int]] = {}
    for event in sorted((e for e in events if "owned" in e), key=lambda e: e["at"]):
        if event["pid"] in pids:
            latest[event["pid"]] = event["owned"]
        if event["at"] < after:
            continue
        owned = [p for pid in pids for p in latest.get(pid, [])]
        if len(owned) == partitions and set(owned) == set(range(partitions)):
            return event["at"]
    return None


def run_once(members: int, partitions: int, timeout: float) -> tuple[float | None, ...]:
    with tempfile.TemporaryDirectory() as root:
        Twain(root).create_topic(TOPIC, partitions=partitions)
        start_at = time.monotonic() + 1.0 + 0.05 * members  # every child imported by then
        children = [
            subprocess.Popen(
                [sys.executable, __file__, "--member", root, str(start_at)], stdout=subprocess.PIPE
            )
            for _ in range(members)
        ]
        events: list[dict] = []
        selector = selectors.DefaultSelector()
        buffers = {}
        for child in children:
            assert child.stdout is not None
            os.set_blocking(child.stdout.fileno(), False)
            selector.register(child.stdout, selectors.EVENT_READ, child)
            buffers[child.pid] = b""

        def collect(seconds: float) -> None:
            until = time.monotonic() + seconds
            while (left := until - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    child = key.data
                    chunk = os.read(key.fileobj.fileno(), 65536)
                    buffers[child.pid] += chunk
                    *lines, buffers[child.pid] = buffers[child.pid].split(b"\n")
                    events.extend(json.loads(line) for line in lines if line)

        try:
            pids = {c.pid for c in children}
            join = departure = returned = None
            deadline = time.monotonic() + timeout + (start_at - time.monotonic())
            while time.monotonic() < deadline and join is None:
                collect(0.05)
                joined = [e["joined"] for e in events if "joined" in e]
                if len(joined) == members:
                    began = max(e["began"] for e in events if "began" in e)
                    at = settled_at(events, pids, partitions, max(joined))
                    if at is not None:
                        join, returned = at - began, max(joined) - began
            if join is None:
                return None, None, None
            collect(0.3)  # let it be quiet
            victim = children[-1]
            selector.unregister(victim.stdout)
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
            killed = time.monotonic()
            survivors = pids - {victim.pid}
            deadline = killed + timeout
            while time.monotonic() < deadline and departure is None:
                collect(0.05)
                at = settled_at(events, survivors, partitions, killed)
                if at is not None:
                    departure = at - killed
            return join, returned, departure
        finally:
            for child in children:
                child.kill()
                child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["2x4", "8x64", "32x256"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--member", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        member(args.member[0], float(args.member[1]))
        return
    for case in args.cases:
        members, partitions = (int(n) for n in case.split("x"))
        results = [run_once(members, partitions, args.timeout) for _ in range(args.runs)]
        for index, name in enumerate(("join", "returned", "departure")):
            values = [r[index] for r in results if r[index] is not None]
            shown = " ".join(f"{r[index]:.3f}" if r[index] is not None else "-" for r in results)
            median = f"{statistics.median(values):.3f} s" if values else "never"
            print(f"{case:>7} {name:<9}: median {median}  (runs: {shown})", flush=True)


if __name__ == "__main__":
    main()
