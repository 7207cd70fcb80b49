"""What the broker benchmark scripts share: the ~100 B document, filling a destination and
draining it through the public API, closing what the peer cannot close, and running scenarios
with medians. Public API only, so it runs under a peer's python too (the scripts
are run as ``python bench/<name>.py``, which puts this folder on the path).

    SCENARIOS = {"send-json": (send_json_run, 3_000), ...}   # name -> (run(count), count)
    if __name__ == "__main__":
        run_scenarios(__doc__, SCENARIOS)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from mq_bridge import Consumer, Publisher

Scenario = tuple[Callable[[int], float], int]

#: ~100 B as compact JSON; ``n`` numbers the messages.
DOC = {"order_id": 0, "customer": "c-000042", "sku": "SKU-7731-BLUE", "amount": 129.95, "n": 0}
KIND = {"kind": "order.created"}


def payloads(count: int) -> list[bytes]:
    """`count` documents as JSON bytes, numbered 0..count-1."""
    return [json.dumps({**DOC, "n": n}).encode() for n in range(count)]


def fill(config: dict, count: int) -> None:
    """Publish `count` documents to `config`'s endpoint in batches of 500."""
    publisher = Publisher.from_config(config)
    data = payloads(count)
    for start in range(0, count, 500):
        publisher.send_batch(data[start : start + 500])
    close(publisher)


def drain(config: dict, count: int, timeout: float = 120.0) -> int:
    """Read up to `count` messages (`poll(max=500)` + `commit()`) with a consumer of
    `config`; how many arrived."""
    consumer = Consumer.from_config(config)
    seen = drain_consumer(consumer, count, timeout)
    consumer.close()
    return seen


def drain_consumer(consumer: Consumer, count: int, timeout: float = 120.0) -> int:
    """Read up to `count` messages from `consumer` (`poll(max=500)` + `commit()`)."""
    seen, deadline = 0, time.monotonic() + timeout
    while seen < count and time.monotonic() < deadline:
        batch = consumer.poll(max=500, timeout_ms=1000)
        for message in batch:
            _ = message.payload
        seen += len(batch)
        consumer.commit()
    return seen


def close(endpoint: object) -> None:
    """Close what has a `close` (mq-bridge's Publisher has none: it closes when collected)."""
    closer = getattr(endpoint, "close", None)
    if closer is not None:
        closer()


def run_scenarios(
    doc: str | None,
    scenarios: dict[str, Scenario],
    skip: Callable[[str], str | None] = lambda name: None,
) -> None:
    """Parse ``--scenario/--messages/--runs`` and print each scenario's median and runs.

    `skip(name)` may give a reason not to run a scenario in this interpreter.
    """
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("--scenario", default="all", choices=[*scenarios, "all"])
    parser.add_argument("--messages", type=int, default=0, help="0: the scenario's default")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for name in list(scenarios) if args.scenario == "all" else [args.scenario]:
        reason = skip(name)
        if reason:
            print(f"{name:11s} skipped: {reason}", flush=True)
            continue
        run, default = scenarios[name]
        count = args.messages or default
        rates = [run(count) for _ in range(args.runs)]
        print(
            f"{name:11s} n={count:<7d} median {statistics.median(rates):>10,.0f} msg/s  "
            f"runs {', '.join(f'{r:,.0f}' for r in rates)}",
            flush=True,
        )
