"""Consumer-group benchmarks for twainmq, run unchanged against ours and the peer (twainmq 0.2.3).

Scenarios (medians of --runs runs):
  share     two consumers join a 4-partition topic's group; time from creating the first until
            both have received messages and every freshly written message arrived
  failover  two members (one in a child process) consume; the child is killed with SIGKILL;
            time until the survivor has received fresh messages from every partition
  throughput  consume N 100 B messages with one poll() per message, without a group and as
            the only member of a group (ours only: the ratio is between our own two modes)

Usage:
  .venv/bin/python bench/twainmq_groups.py
  "$(scripts/peer-venv.sh twainmq)" bench/twainmq_groups.py --scenarios share failover --runs 1
Only the public API of the seed is used, so the same script measures both packages.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from twainmq import Twain

TOPIC = "events"
PARTITIONS = 4
KEYS = range(64)  # enough keys to land in every partition


def poll_until(consumers, wanted, timeout):
    """Poll round-robin until every payload in ``wanted`` arrived; return who got what."""
    got = [set() for _ in consumers]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            message = consumer.poll()
            if message is not None:
                got[index].add(message.message)
        if set().union(*got) >= wanted and all(got):
            return got
    return None


def write_markers(tmq, tag):
    producer = tmq.producer(TOPIC)
    markers = {f"{tag}-{key}" for key in KEYS}
    for key in KEYS:
        producer.write_message(key, f"{tag}-{key}")
    close = getattr(producer, "close", None)
    if close:
        close()
    return markers


def close_all(*consumers):
    for consumer in consumers:
        close = getattr(consumer, "close", None)
        if close:
            close()


def share_once(root, timeout):
    tmq = Twain(root)
    tmq.create_topic(TOPIC, partitions=PARTITIONS)
    start = time.perf_counter()
    first = tmq.consumer(TOPIC, group="bench")
    second = tmq.consumer(TOPIC, group="bench")
    markers = write_markers(tmq, "fresh")
    got = poll_until([first, second], markers, timeout)
    took = time.perf_counter() - start
    close_all(first, second)
    return took if got is not None else None


def member_child(root):
    """Child mode: a group member that consumes, commits and reports its first message."""
    tmq = Twain(root)
    consumer = tmq.consumer(TOPIC, group="bench")
    announced = False
    while True:
        message = consumer.poll()
        if message is None:
            time.sleep(0.001)
            continue
        consumer.commit()
        if not announced:
            print("consuming", flush=True)
            announced = True


def failover_once(root, timeout):
    tmq = Twain(root)
    tmq.create_topic(TOPIC, partitions=PARTITIONS)
    survivor = tmq.consumer(TOPIC, group="bench")
    child = subprocess.Popen(
        [sys.executable, __file__, "--member", str(root)], stdout=subprocess.PIPE
    )
    try:
        if not both_consuming(tmq, survivor, child, timeout):
            return None
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        start = time.perf_counter()
        markers = write_markers(tmq, "after-kill")
        got = poll_until([survivor], markers, timeout)
        took = time.perf_counter() - start
    finally:
        child.kill()
        child.wait()
        close_all(survivor)
    return took if got is not None else None


def both_consuming(tmq, survivor, child, timeout):
    """Feed probes until the child says it consumes and the survivor received one."""
    os.set_blocking(child.stdout.fileno(), False)
    deadline = time.monotonic() + timeout
    child_ready = survivor_ready = False
    round_number = 0
    while time.monotonic() < deadline and not (child_ready and survivor_ready):
        write_markers(tmq, f"probe{round_number}")
        round_number += 1
        until = time.monotonic() + 0.05
        while time.monotonic() < until:
            survivor_ready = survivor.poll() is not None or survivor_ready
        child_ready = child_ready or b"consuming" in read_available(child.stdout.fileno())
    # Drain so the survivor's later polls only see what comes after the kill.
    while survivor.poll() is not None:
        pass
    return child_ready and survivor_ready


def read_available(fd):
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


def fill(tmq, count):
    producer = tmq.producer(TOPIC)
    payload = "x" * 100
    for index in range(count):
        producer.write_message(index % 65536, payload)
    close_all(producer)


def consume_rate(consumer, count):
    """(wall-clock, CPU-time) messages per second; CPU time is steadier on a busy machine."""
    start, cpu_start = time.perf_counter(), time.process_time()
    read = 0
    while read < count:
        if consumer.poll() is not None:
            read += 1
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return count / wall, count / max(cpu, 1e-9)


def throughput_once(root, count):
    """Alternate plain and group reads of the same data, so neither gets the warmer caches."""
    tmq = Twain(root)
    tmq.create_topic(TOPIC, partitions=PARTITIONS)
    fill(tmq, count)
    plain, group = [], []
    for round_number in range(2):
        for rates, options in ((plain, {}), (group, {"group": f"bench{round_number}"})):
            consumer = tmq.consumer(TOPIC, start_from="start", **options)
            rates.append(consume_rate(consumer, count))
            close_all(consumer)
    return best_rates(plain), best_rates(group)


def best_rates(rates):
    """The best wall-clock and the best CPU-time rate of several rounds."""
    return max(r[0] for r in rates), max(r[1] for r in rates)


def median_or_none(values):
    values = [v for v in values if isinstance(v, float)]
    return statistics.median(values) if values else None


def fmt_seconds(value, timeout):
    if isinstance(value, float):
        return f"{value:.3f} s"
    return "failed" if value == "failed" else f"did not happen within {timeout} s"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", default=["share", "failover", "throughput"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--count", type=int, default=500_000)
    parser.add_argument("--member", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        member_child(args.member)
        return
    print(f"python {sys.executable}")
    for scenario in args.scenarios:
        results = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as root:
                root = Path(root) / "store"
                root.mkdir()
                try:
                    results.append(run_scenario(scenario, root, args))
                except Exception as error:  # a package under test that breaks is a result too
                    print(f"{scenario}: failed: {type(error).__name__}: {error}")
                    results.append("failed")
        report(scenario, results, args.timeout)


def run_scenario(scenario, root, args):
    if scenario == "share":
        return share_once(root, args.timeout)
    if scenario == "failover":
        return failover_once(root, args.timeout)
    return throughput_once(root, args.count)


def report(scenario, results, timeout):
    if scenario == "throughput":
        results = [r for r in results if isinstance(r, tuple)]
        for index, clock in enumerate(("wall clock", "CPU time")):
            plain = statistics.median(r[0][index] for r in results)
            group = statistics.median(r[1][index] for r in results)
            print(
                f"throughput ({clock}) no group: {plain:,.0f} msg/s  group: {group:,.0f} msg/s"
                f"  ratio {group / plain:.2f}x"
            )
        return
    shown = ", ".join(fmt_seconds(r, timeout) for r in results)
    print(f"{scenario}: median {fmt_seconds(median_or_none(results), timeout)} ({shown})")


if __name__ == "__main__":
    main()
