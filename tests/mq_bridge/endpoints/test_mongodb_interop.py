"""Documents written by mq-bridge 1.2.0 (the peer), read by our `mongodb` endpoint.

On NX-27017 only this direction can be shown: mq-bridge-py 0.3.2's publisher fails there
(its sequencer counter comes back as Int32 and it insists on Int64), its work queue never
claims a document, and the emulator hands binary `_id`s back with subtype 0, so mq-bridge
1.2.0 cannot parse our (and its own) BSON UUID `_id`s as UUIDs. On a real MongoDB the
layout is the same both ways (see `codec`).
"""

from __future__ import annotations

import json

import pytest

from tests import peers
from tests.mq_bridge.endpoints.test_mongodb import DATABASE, collection, config, drain
from tests.mq_bridge.helpers import open_input

pytestmark = pytest.mark.mongodb
__all__ = ["collection"]  # the fixture, used by name

PEER_PUBLISH = """
import json, sys
from mq_bridge import Message, Publisher
url, database, collection = sys.argv[1:4]
publisher = Publisher.from_config(
    {"mongodb": {"url": url, "database": database, "collection": collection}}
)
sent = [
    Message(b'{"n": 1}', {"kind": "order"}, "0190c3b2-0000-7000-8000-000000000001"),
    Message(bytes([0, 255, 7]), {"a": "b"}, "0190c3b2-0000-7000-8000-000000000002"),
]
for message in sent:
    publisher.send(message)
del publisher
print(json.dumps([m.id for m in sent]))
"""


def test_documents_mq_bridge_writes_are_read_with_id_payload_and_metadata(
    mongodb_url: str, collection: str
) -> None:
    python = peers.peer_python("mq-bridge")
    source = open_input(config(mongodb_url, collection, change_stream=True))
    out = peers.run_peer(python, PEER_PUBLISH, mongodb_url, DATABASE, collection)
    ids = json.loads(out.strip().splitlines()[-1])
    got = drain(source, 2)
    assert [(m.id, m.payload, m.metadata) for m in got] == [
        (ids[0], b'{"n": 1}', {"kind": "order"}),
        (ids[1], bytes([0, 255, 7]), {"a": "b"}),
    ]
    source.close()
