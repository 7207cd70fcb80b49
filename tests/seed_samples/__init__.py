"""The code samples of the two seed documents, kept here verbatim so that tests never
depend on the seeds being on disk.

The seeds (``<repo>/../shared/seeds/``, beside the repository: see ``SEEDS``) are the
documents the project implements; every code sample in them must run unchanged. The tests
that run a sample take it from here; ``tests/test_seed_samples.py`` checks that each one
still appears verbatim in its seed whenever the seeds are present (always in CI).

Each sample is a string holding the sample exactly as the seed prints it, ending in a newline.
"""

from __future__ import annotations

from pathlib import Path

#: Where the seeds live: the ``shared`` directory beside the repository's checkout.
SEEDS = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"
#: The TwainMQ "Getting Started" guide.
TWAINMQ_GUIDE = "000_670d27287a2706b5.txt"
#: The README of the mq-bridge Python bindings.
MQ_BRIDGE_README = "004_df4c23fd895aba6c.txt"

#: Getting Started, "Creating a Message Store".
CREATE_STORE = """\
from twainmq import Twain

mq = Twain("/tmp/twain")
"""

#: Getting Started, "Creating a Topic".
CREATE_TOPIC = """\
tmq = Twain("/tmp/twain")

tmq.create_topic("events", key_type="u16", partitions=4)
"""

#: Getting Started, "Producing Messages".
PRODUCE = """\
producer = tmq.producer("events")

producer.write_message(12, "Hello world")

x = 12345
producer.write_message(42, x.to_bytes(16))
"""

#: Getting Started, "Consuming Messages".
CONSUME = """\
consumer = tmq.consumer("events", group="event-readers")

print(consumer.poll())
consumer.commit()
print(consumer.poll())
"""

#: Getting Started, "Consumer Groups".
GROUPS = """\
c1 = tmq.consumer("events", group="workers")
c2 = tmq.consumer("events", group="workers")
"""

#: Getting Started, "Using Dataclass Messages".
DATACLASSES = """\
from dataclasses import dataclass

@dataclass
class Event:
    id: int
    text: str

tmq.register_msg_cls(Event)

producer = tmq.producer("events")
producer.write_message(7, Event(id=1, text="hello"))
"""

#: README, "Config types and schema": the typed config.
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

#: README, "Config types and schema": the schema call.
SCHEMA = """\
from mq_bridge import config_schema

schema = config_schema()        # the JSON Schema as a dict
"""

#: README, "Running a route".
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

#: README, "Pull-based consumer" (a NATS broker).
PULL_CONSUMER = """\
from mq_bridge import Consumer

consumer = Consumer.from_config({"nats": {"subject": "orders", "url": "nats://localhost:4222"}})

while not consumer.exhausted:
    batch = consumer.poll(max=500, timeout_ms=1000)   # [] on timeout
    if not batch:
        continue
    for message in batch:
        handle(message.json())
    consumer.commit()                                 # ack only after handling
"""

#: README, "Per-batch tokens: poll_batch / ack / nack".
POLL_BATCH = """\
messages, token = consumer.poll_batch(max=500, timeout_ms=1000)  # ([], None) on timeout
if token is not None:                  # nothing returned on an idle timeout
    # ... persist the batch downstream ...
    consumer.ack(token)                # or consumer.nack(token) to redeliver
"""

#: README, the context-manager consumer.
CONSUMER_BLOCK = """\
with Consumer.from_config(cfg) as consumer:
    batch = consumer.poll(max=500, timeout_ms=1000)
    ...
    consumer.commit()
# connection released here
"""

#: README, the dlt resource (needs dlt and a NATS broker).
DLT_RESOURCE = """\
import dlt
from mq_bridge import Consumer

@dlt.resource(name="orders")
def orders():
    consumer = Consumer.from_config({"nats": {"subject": "orders", "url": "nats://localhost:4222"}})
    while not consumer.exhausted:
        batch = consumer.poll(max=500, timeout_ms=1000)
        if not batch:
            break                 # nothing more pending this run
        yield [m.json() for m in batch]
        consumer.commit()
"""

#: Every sample by name: (the seed it comes from, its text).
SAMPLES: dict[str, tuple[str, str]] = {
    "CREATE_STORE": (TWAINMQ_GUIDE, CREATE_STORE),
    "CREATE_TOPIC": (TWAINMQ_GUIDE, CREATE_TOPIC),
    "PRODUCE": (TWAINMQ_GUIDE, PRODUCE),
    "CONSUME": (TWAINMQ_GUIDE, CONSUME),
    "GROUPS": (TWAINMQ_GUIDE, GROUPS),
    "DATACLASSES": (TWAINMQ_GUIDE, DATACLASSES),
    "TYPED_CONFIG": (MQ_BRIDGE_README, TYPED_CONFIG),
    "SCHEMA": (MQ_BRIDGE_README, SCHEMA),
    "RUNNING": (MQ_BRIDGE_README, RUNNING),
    "PULL_CONSUMER": (MQ_BRIDGE_README, PULL_CONSUMER),
    "POLL_BATCH": (MQ_BRIDGE_README, POLL_BATCH),
    "CONSUMER_BLOCK": (MQ_BRIDGE_README, CONSUMER_BLOCK),
    "DLT_RESOURCE": (MQ_BRIDGE_README, DLT_RESOURCE),
}
