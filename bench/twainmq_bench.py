"""Engine benchmarks: one script for twainmq and for the peer (twainmq 0.2.3), public API only.

    python bench/twainmq_bench.py SCENARIO [--count N]     # measure the installed twainmq
    python bench/twainmq_bench.py --compare [SCENARIO ...]  # ours vs the peer, side by side

--compare runs "ours" with the python running this script and the peer with the python
`scripts/peer-venv.sh twainmq` prints (it makes the peer's venv on first use, under
$TWAINMQ_PEERS_DIR or .peers/); --peer-python PATH uses another. --before SRC adds a column:
our python with PYTHONPATH=SRC, e.g. the src/ of a `git worktree` of an earlier commit, run in
the same alternation, so that a change is measured against the peer before and after at once.

Scenarios (100-byte messages, u16 keys cycling over 1000 values (--keys N: produce* cycle over
N keys, e.g. 65536), 4 partitions, unless said):
  produce       write_message one at a time
  produce1000   write_message one at a time, 1000-byte messages
  produce-exclusive  write_message one at a time, producer(exclusive=True) (peer: no option)
  batch         write_messages (the peer has none: it falls back to write_message one by one)
  fsync-batch   write_message one at a time with fsync="batch" (peer: no fsync option)
  fsync-always  write_message one at a time with fsync="always" (peer: no fsync option)
  consume       a fresh consumer without group, one poll() per message, reading .message
  consume1000   the same with 1000-byte messages
  disk          bytes of all the store's files per message, divided by the payload size
  rss           RSS growth (KiB) while one consumer reads --count messages (1M by default)

Each scenario runs 3 times (--runs) in a fresh directory; the median is printed as JSON.
--compare alternates our run and the peer's, 3 times each, so both see the same load.
--clock cpu measures the process's CPU time instead of wall time: on a machine shared with
other jobs, wall-time figures moved by 2x between runs; CPU time moves much less (it leaves
out time spent waiting for a core, not time spent waiting for the disk).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from twainmq import Twain

CLOCK = time.perf_counter
PEER_VENV_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "peer-venv.sh"
PARTITIONS = 4
KEYS = 1000  # distinct payloads, and distinct keys unless --keys says otherwise
KEY_COUNT = KEYS
SCENARIOS = (
    "produce",
    "produce1000",
    "produce-exclusive",
    "batch",
    "fsync-batch",
    "fsync-always",
    "consume",
    "consume1000",
    "disk",
    "rss",
)


def payloads(size: int) -> list[str]:
    """1000 distinct messages of ``size`` random letters and digits (seeded).

    Random text, not a repeated character: the peer deflates every message, and a payload
    that compresses to nothing would flatter it.
    """
    rng = random.Random(size)
    alphabet = string.ascii_letters + string.digits
    return ["".join(rng.choices(alphabet, k=size)) for _ in range(KEYS)]


def open_topic(root: str) -> Twain:
    tmq = Twain(root)
    tmq.create_topic("bench", "u16", partitions=PARTITIONS)
    return tmq


def make_producer(tmq: Twain, **options: object):  # type: ignore[no-untyped-def]
    try:
        return tmq.producer("bench", **options)
    except TypeError:  # the peer has no fsync or exclusive option
        return tmq.producer("bench")


def fill(tmq: Twain, count: int, size: int) -> None:
    """Write ``count`` messages as fast as the library allows (setup, not measured)."""
    producer = make_producer(tmq)
    msgs = payloads(size)
    items = [(i % KEYS, msgs[i % KEYS]) for i in range(count)]
    if hasattr(producer, "write_messages"):
        for start in range(0, count, 100_000):
            producer.write_messages(items[start : start + 100_000])
    else:
        for key, msg in items:
            producer.write_message(key, msg)


def produce(root: str, count: int, size: int = 100, **options: object) -> float:
    tmq = open_topic(root)
    producer = make_producer(tmq, **options)
    msgs = payloads(size)
    write = producer.write_message
    start = CLOCK()
    keys = KEY_COUNT
    for i in range(count):
        write(i % keys, msgs[i % KEYS])
    if hasattr(producer, "flush"):
        producer.flush()
    return count / (CLOCK() - start)


def batch(root: str, count: int) -> float:
    tmq = open_topic(root)
    producer = make_producer(tmq)
    msgs = payloads(100)
    items = [(i % KEYS, msgs[i % KEYS]) for i in range(count)]
    start = CLOCK()
    if hasattr(producer, "write_messages"):
        for first in range(0, count, 10_000):
            producer.write_messages(items[first : first + 10_000])
    else:
        for key, msg in items:
            producer.write_message(key, msg)
    return count / (CLOCK() - start)


def consume(root: str, count: int, size: int = 100) -> float:
    tmq = open_topic(root)
    fill(tmq, count, size)
    consumer = tmq.consumer("bench", start_from="start")
    poll = consumer.poll
    seen = 0
    start = CLOCK()
    while seen < count:
        msg = poll()
        if msg is None:
            raise SystemExit(f"consume: only {seen} of {count} messages came back")
        msg.message  # noqa: B018 - a reader looks at the payload
        seen += 1
    return count / (CLOCK() - start)


def disk(root: str, count: int) -> float:
    tmq = open_topic(root)
    fill(tmq, count, 100)
    # Every file of the topic counts: segments, indexes, heads, config.
    files = [p for p in Path(root).rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / count / 100


def rss_kib() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def rss(root: str, count: int) -> float:
    tmq = open_topic(root)
    fill(tmq, count, 100)
    consumer = tmq.consumer("bench", start_from="start")
    for _ in range(10_000):
        consumer.poll()
    before = rss_kib()
    while consumer.poll() is not None:
        pass
    return float(rss_kib() - before)


def run(scenario: str, count: int, runs: int = 3) -> float:
    jobs: dict[str, Callable[[str], float]] = {
        "produce": lambda r: produce(r, count),
        "produce1000": lambda r: produce(r, count, 1000),
        "produce-exclusive": lambda r: produce(r, count, exclusive=True),
        "batch": lambda r: batch(r, count),
        "fsync-batch": lambda r: produce(r, count, fsync="batch"),
        "fsync-always": lambda r: produce(r, count, fsync="always"),
        "consume": lambda r: consume(r, count),
        "consume1000": lambda r: consume(r, count, 1000),
        "disk": lambda r: disk(r, count),
        "rss": lambda r: rss(r, count),
    }
    results = []
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="twainmq-bench-", dir=os.environ.get("BENCH_DIR"))
        try:
            results.append(jobs[scenario](root))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return statistics.median(results)


def default_count(scenario: str) -> int:
    return {"rss": 1_000_000, "fsync-always": 5_000}.get(scenario, 200_000)


def peer_python() -> str:
    """The peer's python, from `scripts/peer-venv.sh twainmq` (which makes its venv once)."""
    result = subprocess.run(
        [str(PEER_VENV_SCRIPT), "twainmq"], stdout=subprocess.PIPE, text=True, check=True
    )
    return result.stdout.strip()


def compare(
    scenarios: list[str],
    count: int | None,
    peer: str,
    keys: int = KEYS,
    before: str | None = None,
    clock: str = "wall",
) -> None:
    """Run each scenario 3 times with our python and the peer's (and ``before``'s: our python
    on another source tree), alternating, so that all meet the same machine load; print the
    medians and the ratios to the peer."""
    sides: dict[str, tuple[str, str | None]] = {
        "ours": (sys.executable, None),
        "peer": (peer, None),
    }
    if before:
        sides["before"] = (sys.executable, before)
    header = f"{'scenario':18} {'ours':>14} {'peer 0.2.3':>14} {'ratio':>8}"
    print(header + (f" {'before':>14} {'ratio':>8}" if before else ""))
    for scenario in scenarios:
        figures: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(3):
            for side, (python, source) in sides.items():
                if scenario == "rss" and side == "peer":
                    continue
                args = [
                    python,
                    __file__,
                    scenario,
                    "--runs=1",
                    f"--keys={keys}",
                    f"--clock={clock}",
                ]
                args += [f"--count={count}"] if count else []
                env = dict(os.environ, PYTHONPATH=source) if source else None
                out = subprocess.run(
                    args, capture_output=True, text=True, check=True, env=env
                ).stdout
                figures[side].append(json.loads(out)["value"])
        medians = {side: statistics.median(v) if v else None for side, v in figures.items()}
        ours, theirs = medians["ours"], medians["peer"]
        line = f"{scenario:18} {_figure(ours)} {_figure(theirs)} {_ratio(ours, theirs)}"
        if before:
            line += f" {_figure(medians['before'])} {_ratio(medians['before'], theirs)}"
        print(line, flush=True)


def _figure(value: float | None) -> str:
    return f"{value:>14,.2f}" if value is not None else f"{'-':>14}"


def _ratio(value: float | None, peer: float | None) -> str:
    return f"{value / peer:>7.1f}x" if value is not None and peer else f"{'-':>8}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="*", choices=[*SCENARIOS, []], default=[])
    parser.add_argument("--count", type=int)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--keys", type=int, default=KEYS, help="distinct u16 keys of produce* (default 1000)"
    )
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--peer-python", help="the peer's python (default: scripts/peer-venv.sh twainmq)"
    )
    parser.add_argument(
        "--before", metavar="SRC", help="--compare: also run our python with PYTHONPATH=SRC"
    )
    args = parser.parse_args()
    global CLOCK, KEY_COUNT
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    KEY_COUNT = args.keys
    if args.compare:
        scenarios = args.scenario or list(SCENARIOS)
        peer = args.peer_python or peer_python()
        compare(scenarios, args.count, peer, args.keys, args.before, args.clock)
        return
    for scenario in args.scenario:
        count = args.count or default_count(scenario)
        value = run(scenario, count, args.runs)
        print(json.dumps({"scenario": scenario, "count": count, "value": value}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
