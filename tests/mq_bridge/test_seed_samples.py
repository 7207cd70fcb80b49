"""Every seed README sample that uses memory or response runs unchanged.

The samples are copied verbatim below; `test_samples_match_the_seed` fails when the seed
(``../shared/seeds/004_*.txt``, beside the repository) and these copies drift apart. Names a
sample uses without defining (``config``, ``handle``, ``publisher``, ``cfg``, ``consumer``)
come from a preamble over memory topics.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mq_bridge import Consumer, Publisher
from tests.mq_bridge.helpers import read, unique

SEED = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "004_df4c23fd895aba6c.txt"

TYPED_CONFIG = """\
from mq_bridge import Route
from mq_bridge.config import ConfigDocument

config: ConfigDocument = {
    "routes": {
        "orders": {
            "input": {"memory": {"topic": "orders.in", "capacity": 1600}},
            "output": {"response": {}},
            "batch_size": 128,
        }
    }
}
route = Route.from_config(config, "orders")
"""

SCHEMA = """\
from mq_bridge import config_schema

schema = config_schema()        # the JSON Schema as a dict
"""

RUNNING = """\
route = Route.from_config(config, "orders_route").with_handler(handle)

# Non-blocking: deploys, returns, and runs on a background thread.
route.start()
publisher.send_json({"order_id": 42}, {"kind": "order.created"})
route.stop()
route.join()   # optional: wait for a clean shutdown

# Or scope it to a block — starts on enter, stops + joins on exit:
with Route.from_config(config, "orders_route").with_handler(handle):
    publisher.send_json({"order_id": 42}, {"kind": "order.created"})
"""

CONSUMER_BLOCK = """\
with Consumer.from_config(cfg) as consumer:
    batch = consumer.poll(max=500, timeout_ms=1000)
    ...
    consumer.commit()
# connection released here
"""

POLL_BATCH = """\
messages, token = consumer.poll_batch(max=500, timeout_ms=1000)  # ([], None) on timeout
if token is not None:                  # nothing returned on an idle timeout
    # ... persist the batch downstream ...
    consumer.ack(token)                # or consumer.nack(token) to redeliver
"""

SAMPLES = [TYPED_CONFIG, SCHEMA, RUNNING, CONSUMER_BLOCK, POLL_BATCH]


def _squash(text: str) -> str:
    return " ".join(text.split())


def test_samples_match_the_seed():
    if not SEED.exists():
        pytest.skip(f"the seed is not beside the repository ({SEED})")
    seed = _squash(SEED.read_text(encoding="utf-8"))
    for sample in SAMPLES:
        assert _squash(sample) in seed, textwrap.shorten(sample, 80)


def test_the_typed_config_sample_builds_a_route_that_answers_requests():
    namespace: dict = {}
    exec(TYPED_CONFIG, namespace)
    route = namespace["route"].with_handler(lambda m: {"ok": m.json()["order_id"]})
    with (
        route,
        Publisher.from_config({"memory": {"topic": "orders.in", "request_reply": True}}) as p,
    ):
        assert p.request_json({"order_id": 7}).json() == {"ok": 7}


def test_the_schema_sample_returns_the_json_schema():
    namespace: dict = {}
    exec(SCHEMA, namespace)
    assert namespace["schema"]["$schema"].startswith("https://json-schema.org/")


def test_the_running_sample_delivers_both_sends():
    source, sink = unique("orders"), unique("handled")
    handled = []

    def handle(message):
        handled.append(message.json())
        return message

    namespace = {
        "Route": __import__("mq_bridge").Route,
        "config": {
            "routes": {
                "orders_route": {
                    "input": {"memory": {"topic": source}},
                    "output": {"memory": {"topic": sink}},
                }
            }
        },
        "handle": handle,
        "publisher": Publisher.from_config({"memory": {"topic": source}}),
    }
    exec(RUNNING, namespace)
    assert len(read(sink, 2, 10.0)) + len(read(source, 2, 0.1)) == 2  # none lost
    assert all(doc == {"order_id": 42} for doc in handled)


def test_the_consumer_samples_poll_commit_and_ack():
    topic = unique("cfg")
    Publisher.from_config({"memory": {"topic": topic}}).send_batch([b"1", b"2"])
    namespace = {"Consumer": Consumer, "cfg": {"memory": {"topic": topic}}}
    exec(CONSUMER_BLOCK, namespace)
    assert [m.payload for m in namespace["batch"]] == [b"1", b"2"]
    Publisher.from_config({"memory": {"topic": topic}}).send(b"3")
    with Consumer.from_config({"memory": {"topic": topic}}) as consumer:
        namespace = {"consumer": consumer}
        exec(POLL_BATCH, namespace)
        assert [m.payload for m in namespace["messages"]] == [b"3"]
        assert consumer.poll(max=5, timeout_ms=10) == []  # acked, not redelivered
