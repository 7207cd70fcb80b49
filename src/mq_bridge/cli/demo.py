"""``mq-bridge demo``: a durable pipeline on the embedded twainmq log, with no server.

It writes a config file into a fresh store directory, publishes sample orders into the
topic ``orders``, runs the route ``enrich`` (twain ``orders`` -> `enrich_order` -> twain
``orders.enriched``) with live progress, stops once every order is through, and prints a
summary: counts, rates, where the data is and the commands that inspect it. Everything
it does is what a user would do: the route comes from the config file through the same
code as ``mq-bridge run``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mq_bridge.cli.config_file import load_routes
from mq_bridge.cli.progress import ProgressReporter, RouteCounter, with_metrics_first
from mq_bridge.cli.run import add_output_options, configure_logging
from mq_bridge.cli.supervisor import supervise
from mq_bridge.consumer import Consumer
from mq_bridge.errors import MQBridgeError
from mq_bridge.message import Message
from mq_bridge.publisher import Publisher
from mq_bridge.route import Route

__all__ = ["add_parsers", "enrich_order", "run_demo", "sample_order", "write_pipeline_config"]

_PUBLISH_BATCH = 1000
_REGIONS = ("north", "south", "east", "west")
#: Safety net: the demo stops if nothing moves for this long (it normally stops when done).
_STALL_SECONDS = 30.0

PIPELINE = """\
# The mq-bridge demo's pipeline. Run it again with (it stops after 1 s without a new order):
#   mq-bridge run {config} --handler mq_bridge.cli.demo:enrich_order --stop-when-idle 1
publishers:
  orders:            # where the demo publishes sample orders (keyed by customer)
    twain: {{root: {root}, topic: orders, key_from: customer,
             create: {{partitions: 4, key_type: u32}}}}
routes:
  enrich:
    batch_size: 2048
    input:
      twain: {{root: {root}, topic: orders, group: enrich,
               create: {{partitions: 4, key_type: u32}}}}
    output:
      twain: {{root: {root}, topic: orders.enriched, key_from: customer,
               create: {{partitions: 4, key_type: u32}}}}
consumers:
  enriched:          # mq-bridge consume {config} --consumer enriched --max 5 --json
    twain: {{root: {root}, topic: orders.enriched, group: viewer}}
"""


def add_parsers(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo", help="run a durable pipeline on the embedded twainmq log (no server)"
    )
    demo.add_argument(
        "-n", "--messages", type=int, default=50_000, help="orders to publish (default 50000)"
    )
    demo.add_argument("--root", help="the store directory (default: a fresh temporary one)")
    add_output_options(demo)
    demo.set_defaults(run=run_demo)


def sample_order(number: int) -> dict[str, Any]:
    """The demo's order `number`: a customer, a product, a quantity and a unit price."""
    return {
        "order_id": number,
        "customer": f"customer-{number % 997}",
        "sku": f"sku-{number % 50:02d}",
        "quantity": 1 + number % 5,
        "unit_price_cents": 250 + (number * 37) % 9750,
    }


def enrich_order(message: Message) -> Message:
    """The route's handler: adds the total, a size tier and the customer's region."""
    order = message.json()
    total = order["quantity"] * order["unit_price_cents"]
    order["total_cents"] = total
    order["tier"] = "large" if total >= 20_000 else "medium" if total >= 5_000 else "small"
    order["region"] = _REGIONS[int(order["customer"].rsplit("-", 1)[1]) % len(_REGIONS)]
    return message.with_json(order).with_metadata(kind="order.enriched")


def write_pipeline_config(root: Path) -> Path:
    """Write the demo's config file into `root` (created if missing); return its path."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "pipeline.yaml"
    path.write_text(PIPELINE.format(root=json.dumps(str(root)), config=path), encoding="utf-8")
    return path


def run_demo(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    count = args.messages
    if count < 1:
        raise MQBridgeError(f"--messages {count} must be at least 1")
    root = Path(args.root or tempfile.mkdtemp(prefix="mq-bridge-demo-")).absolute()
    config = write_pipeline_config(root)
    print(f"store: {root}\nconfig: {config}")
    _publish_orders(config, count)
    done, seconds = _run_enrich_route(config, count, args)
    _print_sample(config)
    _print_summary(root, config, done, seconds)
    if done < count:
        raise MQBridgeError(f"only {done} of {count} orders came through the route")
    return 0


def _publish_orders(config: Path, count: int) -> None:
    began = time.perf_counter()
    with Publisher.from_file(str(config), "orders") as publisher:
        for start in range(0, count, _PUBLISH_BATCH):
            numbers = range(start, min(count, start + _PUBLISH_BATCH))
            publisher.send_batch(_order_message(number) for number in numbers)
    seconds = time.perf_counter() - began
    print(f"published {count:,} orders to topic 'orders' in {seconds:.2f} s "
          f"({count / max(seconds, 1e-9):,.0f} msg/s)")  # fmt: skip


def _order_message(number: int) -> Message:
    order = sample_order(number)
    return Message.from_json(order, {"kind": "order.created", "customer": order["customer"]})


def _run_enrich_route(config: Path, count: int, args: argparse.Namespace) -> tuple[int, float]:
    [route_config] = load_routes(str(config), ["enrich"])
    route = Route(with_metrics_first(route_config)).with_handler(enrich_order)
    reporter = ProgressReporter([RouteCounter("enrich")], args.progress_interval, quiet=args.quiet)
    print("running route 'enrich': orders -> enrich_order -> orders.enriched")
    try:
        reason = supervise(
            {"enrich": route},
            reporter,
            stop_when_idle=_STALL_SECONDS,
            finished=lambda: reporter.total_done() >= count,
        )
    finally:
        reporter.finish()
    print(f"stopped: {reason}", file=sys.stderr)
    reporter.summary(sys.stdout)
    return reporter.total_done(), reporter.last_activity - reporter.started


def _print_sample(config: Path) -> None:
    # A fresh group that never commits: it reads from the start and leaves no trace.
    with Consumer.from_file(str(config), "enriched") as consumer:
        batch = consumer.poll(max=1, timeout_ms=2000)
    if batch:
        print(f"first enriched order: {batch[0].text()}")


def _print_summary(root: Path, config: Path, done: int, seconds: float) -> None:
    print(
        f"\n{done:,} orders enriched in {seconds:.2f} s; both topics are on disk in {root}\n"
        "inspect them:\n"
        f"  twainmq --root {root} describe orders.enriched\n"
        f"  mq-bridge consume {config} --consumer enriched --max 5 --json\n"
        f"  mq-bridge run {config} --handler mq_bridge.cli.demo:enrich_order --stop-when-idle 1"
        "   # resumes: nothing left to do, so it stops after 1 s"
    )
