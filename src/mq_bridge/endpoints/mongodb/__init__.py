"""mongodb: a MongoDB collection as a work queue, a change stream, or a sink (pymongo).

Features
    - Work queue (default): competing consumers claim documents with a lease
      (`locked_until`), delete them on ack and free them on nack; a claim is atomic per
      document and marked with a token, so two consumers never hold the same document
      (mq-bridge 0.3.2 can hand one to two); a dead consumer's documents come back when
      its lease (`lock_duration_ms`) ends; close frees what was not acked.
    - Subscriber mode (`change_stream: true` / `consume: capture_new`): a change stream of
      inserts, every subscriber sees every document; with `cursor_id` the resume token of
      the last acked event is stored and a restarted subscriber resumes after it.
    - `receive_query` filters both modes; `format` normal/json/text/raw for writing
      (reading understands all four, and documents written by mq-bridge).
    - Output: one unordered insert per batch, returning once the server acknowledged (the
      URL's write concern, w=1 by default); `_id` = message id, so a resend after a lost
      acknowledgement is not stored twice. Where the connection needs nothing negotiated
      (no credentials, TLS, compression) inserts go over a socket of the output's own
      (`direct.py`, ~4x less client CPU than pymongo); otherwise through pymongo.
      `ttl_seconds` (TTL index on `created_at`), `capped_size_bytes` (capped collection).
    - Request/reply through ``<collection>_replies`` (mq-bridge's convention):
      `Publisher.request` waits there; a route reading requests with a `response` output
      answers there.
    - Reconnects by itself (pymongo); while the server is away calls raise the retriable
      `EndpointUnavailableError`; `connect()` fails within `serverSelectionTimeoutMS`
      (5 s unless the URL says otherwise).
    - `mqb.src.mongodb_database`, `mqb.src.mongodb_collection`, `mqb.src.mongodb_id`
      (MQB_SOURCE_METADATA=1).

Document layout: see `mq_bridge.endpoints.mongodb.codec`.

URL
    mongodb://[user:password@]host[:port][,host2...]/[?options]  or  mongodb+srv://...

Options (declared in `options.py`, `MongoDbOptions`)
    url, database, collection   where (url and database required; collection too)
    username/password           credentials (win over the URL's; password is a secret)
    tls                         TLS block, passed to pymongo's tls* options
    change_stream / consume     subscriber mode (default: work queue)
    cursor_id, meta_collection  change stream: persisted position, where it is kept
    receive_query               a JSON filter for what is consumed
    polling_interval_ms         work queue: pause when nothing was claimable (100)
    lock_duration_ms            work queue: lease of a claim (60000; ours)
    format                      normal | json | text | raw (and 1.2.0's aliases)
    id_format                   uuid (mq-bridge's) | hex (ours; for NX-27017)
    ttl_seconds                 TTL index on created_at
    capped_size_bytes           create the collection capped
    request_reply, request_timeout_ms, reply_polling_ms   request/reply
    shared                      one client per connection settings (default true)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext, InputEndpoint
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.mongodb.options import MongoDbOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.mongodb.output import MongoDbOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = MongoDbOptions


def _require_pymongo() -> None:
    require_driver("pymongo", endpoint="mongodb", extra="mongodb")


def build_input(options: MongoDbOptions, context: BuildContext) -> InputEndpoint:
    """The work queue, or the change stream subscriber (`change_stream`/`consume`)."""
    _require_pymongo()
    if options.subscriber:
        from mq_bridge.endpoints.mongodb.changes import MongoDbChangeStreamInput

        return MongoDbChangeStreamInput(options, context)
    from mq_bridge.endpoints.mongodb.input import MongoDbQueueInput

    return MongoDbQueueInput(options, context)


def build_output(options: MongoDbOptions, context: BuildContext) -> MongoDbOutput:
    """Inserts into `collection`."""
    _require_pymongo()
    from mq_bridge.endpoints.mongodb.output import MongoDbOutput

    return MongoDbOutput(options, context)
