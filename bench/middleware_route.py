"""Cost of middleware on a route, using only the public API (one script, us and the peer).

    .venv/bin/python bench/middleware_route.py
    "$(scripts/peer-venv.sh mq-bridge)" bench/middleware_route.py

memory -> route(with_handler returning the message) -> memory, batch_size 512, 100k messages
of ~100 B JSON sent with Publisher.send_json and drained with MemoryDrainer, with:

    none        no middleware (the baseline)
    error-path  output [metrics, dlq, retry]: the usual error-handling stack, no failures
    metrics     metrics on the input and the output
    dedup       input deduplication with an in-memory store (every id new)

Prints each scenario's median of --runs, in messages per second.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

from mq_bridge import MemoryDrainer, Publisher, Route

DOC = {"order_id": 0, "customer": "c-000042", "amount": 129.95, "currency": "EUR", "n": 0}


def _middlewares(scenario: str, dead: str) -> tuple[list, list]:
    """(input middlewares, output middlewares) of a scenario."""
    if scenario == "error-path":
        dlq = {"dlq": {"endpoint": {"memory": {"topic": dead}}}}
        return [], [{"metrics": {}}, dlq, {"retry": {"max_attempts": 3}}]
    if scenario == "metrics":
        return [{"metrics": {}}], [{"metrics": {}}]
    if scenario == "dedup":
        return [{"deduplication": {"ttl_seconds": 600, "store": "memory://"}}], []
    return [], []


def route_run(scenario: str, count: int) -> float:
    suffix = uuid.uuid4().hex[:8]
    source, sink, dead = (f"mw-{part}-{suffix}" for part in ("in", "out", "dead"))
    inputs, outputs = _middlewares(scenario, dead)
    capacity = count + 1
    config = {
        "input": {"memory": {"topic": source, "capacity": capacity}, "middlewares": inputs},
        "output": {"memory": {"topic": sink, "capacity": capacity}, "middlewares": outputs},
        "batch_size": 512,
    }
    route = Route.from_config(config).with_handler(lambda message: message)
    publisher = Publisher.from_config({"memory": {"topic": source, "capacity": capacity}})
    drainer = MemoryDrainer.from_topic(sink, capacity)
    with route:
        started = time.perf_counter()
        for n in range(count):
            DOC["n"] = n
            publisher.send_json(DOC, {"kind": "order.created"})
        drained = drainer.drain(count, 120.0)
        elapsed = time.perf_counter() - started
    if drained != count:
        sys.exit(f"{scenario}: drained {drained} of {count}")
    return count / elapsed


def main() -> None:
    scenarios = ["none", "error-path", "metrics", "dedup"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="all", choices=[*scenarios, "all"])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for name in scenarios if args.scenario == "all" else [args.scenario]:
        rates = [route_run(name, args.messages) for _ in range(args.runs)]
        print(
            f"{name:11s} median {statistics.median(rates):>10,.0f} msg/s  "
            f"runs {', '.join(f'{r:,.0f}' for r in rates)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
