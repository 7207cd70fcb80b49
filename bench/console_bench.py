"""Console page times over a store of 100 topics x 16 partitions (target: < 200 ms a page).

    .venv/bin/python bench/console_bench.py [--topics 100] [--partitions 16] [--runs 7]

Builds the store in a temp dir (each partition gets --messages messages; every 5th topic
gets a consumer group that committed half of them), serves the console on a free loopback
port, then fetches each page --runs times over HTTP and prints the median and worst time.
Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from mq_bridge.console import ConsoleServer, ConsoleSettings
from twainmq import Twain


def build_store(root: Path, topics: int, partitions: int, messages: int) -> None:
    store = Twain(root)
    for t in range(topics):
        name = f"topic-{t:03d}"
        store.create_topic(name, partitions=partitions, retention_bytes=1 << 30)
        with store.producer(name) as producer:
            producer.write_messages(
                (p, f'{{"topic": {t}, "n": {n}, "pad": "{"x" * 64}"}}')
                for n in range(messages)
                for p in range(partitions)
            )
        if t % 5 == 0:
            consumer = store.consumer(name, group=f"group-{t:03d}")
            try:
                wanted, seen = messages * partitions // 2, 0
                while seen < wanted:
                    seen += len(consumer.poll_many(wanted - seen, timeout=5))
                consumer.commit()
            finally:
                consumer.close()


def time_page(url: str, runs: int) -> tuple[float, float, int]:
    times, size = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=60) as response:
            size = len(response.read())
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, max(times) * 1000, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--messages", type=int, default=20, help="per partition")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "store"
        started = time.perf_counter()
        build_store(root, args.topics, args.partitions, args.messages)
        print(
            f"store: {args.topics} topics x {args.partitions} partitions x {args.messages} "
            f"messages, built in {time.perf_counter() - started:.1f} s"
        )
        pages = [
            "/topics",
            "/topics/topic-050",
            "/topics/topic-050/messages?partition=7&size=100",
            "/topics/topic-050/messages?partition=7&size=20&page=0",
            "/groups",
            "/groups/topic-050/group-050",
            "/routes",
            "/metrics",
        ]
        with ConsoleServer(ConsoleSettings(store_root=root), 0) as server:
            time_page(f"{server.url}/topics", 1)  # warm the imports and the page cache
            print(f"{'page':<52} {'median ms':>10} {'worst ms':>9} {'bytes':>9}")
            for page in pages:
                median, worst, size = time_page(server.url + page, args.runs)
                print(f"{page:<52} {median:>10.1f} {worst:>9.1f} {size:>9,}")


if __name__ == "__main__":
    main()
