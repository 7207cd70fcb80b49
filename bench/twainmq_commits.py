"""Group commits per second: one member owns every partition, polls one message and commits.

Each commit call stores the position of every owned partition (``commit()`` without
arguments: only the partition just read changed). Run before/after with PYTHONPATH::

    .venv/bin/python bench/twainmq_commits.py --partitions 4 64 256
    PYTHONPATH=/tmp/before15/src .venv/bin/python bench/twainmq_commits.py --partitions 64 256

``--fsync always`` measures power-loss-safe commits (``commit_fsync="always"``; on the code
before issue 15: the default ``durable_commits=True``); the default is each version's default
(after: ``"never"``, before: fsynced). ``--threads N`` runs N members (one per thread, each
owning partitions/N) committing at once, to show group commit sharing fsyncs. Medians of
``--runs`` runs; output: one line per case.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import tempfile
import threading
import time

from twainmq import Twain


def fsync_options(mode: str | None) -> dict[str, object]:
    from twainmq.groups.consumer import join_group

    params = inspect.signature(join_group).parameters
    if mode is None:
        return {}
    if "commit_fsync" in params:
        return {"commit_fsync": mode}
    if mode in ("always", "never"):
        return {"durable_commits": mode == "always"}
    raise SystemExit(f"this version has no commit_fsync={mode!r}")


def member_loop(tmq: Twain, seconds: float, options: dict[str, object], out: list[int],
                ready: threading.Barrier) -> None:  # fmt: skip
    consumer = tmq.consumer("t", group="bench", **options)
    try:
        ready.wait()
        commits = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            if consumer.poll(timeout=0.5) is None:
                break
            consumer.commit()
            commits += 1
        out.append(commits)
    finally:
        consumer.close()


def run_once(partitions: int, seconds: float, mode: str | None, threads: int) -> float:
    with tempfile.TemporaryDirectory() as root:
        tmq = Twain(root)
        tmq.create_topic("t", partitions=partitions)
        with tmq.producer("t", partitioner=lambda key, count: key % count) as producer:
            producer.write_messages([(n % 4096, "x" * 20) for n in range(200_000)])
        options = fsync_options(mode)
        if threads == 1:
            out: list[int] = []
            start = time.perf_counter()
            member_loop(tmq, seconds, options, out, threading.Barrier(1))
            return out[0] / (time.perf_counter() - start)
        ready = threading.Barrier(threads + 1)
        out = []
        workers = [
            threading.Thread(target=member_loop, args=(tmq, seconds, options, out, ready))
            for _ in range(threads)
        ]
        for worker in workers:
            worker.start()
        time.sleep(1.0)  # let the group settle: every member owns its share
        ready.wait()
        start = time.perf_counter()
        for worker in workers:
            worker.join()
        return sum(out) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[4, 64, 256])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fsync", choices=("never", "always", "batch"), default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    for partitions in args.partitions:
        rates = [run_once(partitions, args.seconds, args.fsync, args.threads)
                 for _ in range(args.runs)]  # fmt: skip
        shown = " ".join(f"{rate:,.0f}" for rate in rates)
        mode = args.fsync or "default"
        median = statistics.median(rates)
        print(f"partitions={partitions:>4} fsync={mode:<7} threads={args.threads}: "
              f"median {median:>10,.0f} commits/s  (runs: {shown})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
