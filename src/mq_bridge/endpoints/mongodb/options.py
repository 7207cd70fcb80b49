"""Options of the `mongodb` endpoint (see `mq_bridge.endpoints.mongodb`).

Names, types and meanings are mq-bridge-py 0.3.2's `MongoDbConfig` (the seed's package),
with mq-bridge 1.2.0's `consume` selector and format aliases accepted too, so a peer's
config runs unchanged. Where the peer's schema allows ``null`` for "the default", so do we.
Two options are ours (the peer has fixed values for them): `lock_duration_ms` and
`id_format`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import Field, model_validator

from mq_bridge.config.declarations import (
    MAX_INT64,
    MAX_MILLISECONDS,
    OptionError,
    Options,
    secret_field,
)
from mq_bridge.endpoints.kit.tls import TlsOptions

__all__ = ["FORMAT_ALIASES", "MongoDbOptions"]

#: mq-bridge 1.2.0's alternative names for the formats.
FORMAT_ALIASES = {
    "envelope": "normal",
    "envelope_json": "json",
    "envelope_text": "text",
    "payload": "raw",
}
#: mq-bridge 1.2.0's `consume` values we implement, and what each means here.
_CONSUME_MODES = {"delete": False, "consumer": False, "capture_new": True}


class MongoDbOptions(Options):
    """A MongoDB collection: a work queue (claim, delete on ack) or a change stream."""

    model_config = {**Options.model_config, "title": "MongoDbConfig"}  # mq-bridge's $defs name

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset(
        {"polling_interval_ms", "reply_polling_ms", "request_timeout_ms", "shared"}
    )

    # Not a `secret_field`: that would make every endpoint's `url` key secret. A password
    # in the URL is hidden wherever config text is shown (config.redaction.redact_text).
    url: str = Field(
        min_length=1,
        description="MongoDB connection string URI (`mongodb://` or `mongodb+srv://`); may "
        "list several hosts for a replica set. Userinfo in it is treated as a secret. URI "
        "options (`w`, `serverSelectionTimeoutMS`, `tls`, ...) are passed to pymongo.",
    )
    database: str = Field(min_length=1, description="The database name.")
    collection: str | None = Field(
        None, min_length=1, description="The MongoDB collection name (required)."
    )
    username: str | None = Field(
        None, description="Optional username. Takes precedence over credentials in the `url`."
    )
    password: str | None = secret_field(
        None, description="Optional password. Takes precedence over credentials in the `url`."
    )
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}),
        description="TLS: a private CA in `ca_file`, a client certificate in `cert_file` "
        "(and `key_file`), `accept_invalid_certs` for tlsAllowInvalidCertificates.",
    )
    polling_interval_ms: int | None = Field(
        100,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Consumer only) Polling interval in milliseconds for the work queue "
        "when it finds nothing to claim. Defaults to 100ms.",
    )
    reply_polling_ms: int | None = Field(
        50,
        ge=0,
        le=MAX_MILLISECONDS,
        description="(Publisher only) First polling interval in milliseconds while waiting "
        "for a reply (grows by half each time, to 500ms). Defaults to 50ms.",
    )
    request_reply: bool = Field(
        False,
        description="(Publisher only) Index the `<collection>_replies` collection for "
        "requests at connect. `Publisher.request` waits for the reply there either way.",
    )
    change_stream: bool = Field(
        False,
        description="(Consumer only) If true, use a Change Stream (**Subscriber mode**): "
        "every consumer sees every inserted document, nothing is deleted. Defaults to false "
        "(work queue: competing consumers claim and delete documents).",
    )
    consume: Literal["delete", "consumer", "capture_new"] | None = Field(
        None,
        description="(Consumer only, mq-bridge 1.2.0's name) `delete`/`consumer` = the work "
        "queue, `capture_new` = the change stream. When set it wins over `change_stream`.",
    )
    request_timeout_ms: int | None = Field(
        30_000,
        ge=1,
        le=MAX_MILLISECONDS,
        description="(Publisher only) Timeout for request-reply operations in milliseconds. "
        "Defaults to 30000ms.",
    )
    ttl_seconds: int | None = Field(
        None,
        ge=1,
        le=MAX_INT64,
        description="(Publisher only) If set, a TTL index on `created_at` removes documents "
        "this many seconds after they were written (replies too).",
    )
    capped_size_bytes: int | None = Field(
        None,
        ge=1,
        le=MAX_INT64,
        description="(Publisher only) If set and the collection does not exist yet, create "
        "it as a capped collection of this size in bytes.",
    )
    format: Literal[
        "normal", "json", "text", "raw", "envelope", "envelope_json", "envelope_text", "payload"
    ] = Field(
        "normal",
        description="How documents hold messages: `normal` (payload as binary), `json` "
        "(payload as a BSON value when it is JSON), `text` (payload as a string when it is "
        "UTF-8), `raw` (the JSON payload is the document itself). Readers accept all four.",
    )
    cursor_id: str | None = Field(
        None,
        min_length=1,
        description="(Change stream) Persist the position (the resume token of the last "
        "acknowledged event) under this name, and resume from it. Without it a subscriber "
        "starts at the current end of the stream (ephemeral).",
    )
    receive_query: str | None = Field(
        None,
        description="(Consumer only) A MongoDB filter as a JSON string (e.g. "
        '\'{"type": "notification"}\'): only matching documents are claimed or delivered.',
    )
    meta_collection: str | None = Field(
        None,
        min_length=1,
        description="(Change stream) Collection that stores cursor positions. Defaults to "
        "the message collection.",
    )
    shared: bool | None = Field(
        True,
        description="Share one MongoDB client per connection (default: true); false forces "
        "a dedicated client.",
    )
    lock_duration_ms: int = Field(
        60_000,
        ge=1,
        le=MAX_MILLISECONDS,
        description="(Consumer only, ours) How long a claimed document stays locked: a "
        "consumer that dies holding it releases it after this long. Defaults to 60000ms "
        "(the peer's fixed 60s).",
    )
    id_format: Literal["uuid", "hex"] = Field(
        "uuid",
        description="(ours) How a message id becomes the document `_id`: `uuid` (BSON UUID, "
        "binary subtype 4: mq-bridge's layout) or `hex` (32 hex digits: for servers that "
        "cannot update documents with a binary `_id`, such as the NX-27017 emulator).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> MongoDbOptions:
        try:
            parts = urlsplit(self.url)
        except ValueError as error:
            raise OptionError("url", f"not a valid URL: {error}") from None
        if parts.scheme.lower() not in ("mongodb", "mongodb+srv"):
            raise OptionError(
                "url", f"the scheme must be mongodb:// or mongodb+srv://, not {parts.scheme!r}"
            )
        if not parts.netloc.rpartition("@")[2]:
            raise OptionError("url", "the URL names no host (mongodb://host:27017)")
        if self.collection is None:
            raise OptionError("collection", "the mongodb endpoint needs a `collection`")
        if self.receive_query is not None:
            self._parse_query(self.receive_query)
        return self

    @staticmethod
    def _parse_query(text: str) -> dict[str, Any]:
        try:
            query = json.loads(text)
        except ValueError as error:
            raise OptionError("receive_query", f"not valid JSON: {error}") from None
        if not isinstance(query, dict):
            raise OptionError("receive_query", "must be a JSON object (a MongoDB filter)")
        return query

    @property
    def query(self) -> dict[str, Any]:
        """`receive_query` parsed (as MongoDB extended JSON), or an empty filter."""
        if not self.receive_query:
            return {}
        from bson import json_util

        return dict(json_util.loads(self.receive_query))

    @property
    def collection_name(self) -> str:
        assert self.collection is not None  # checked by the validator
        return self.collection

    @property
    def subscriber(self) -> bool:
        """Change stream mode (`consume: capture_new`, or `change_stream: true`)."""
        if self.consume is not None:
            return _CONSUME_MODES[self.consume]
        return self.change_stream

    @property
    def storage_format(self) -> str:
        """`format` with mq-bridge 1.2.0's aliases resolved."""
        return FORMAT_ALIASES.get(self.format, self.format)

    @property
    def polling_interval(self) -> float:
        value = 100 if self.polling_interval_ms is None else self.polling_interval_ms
        return max(value, 1) / 1000  # 0 (the peer allows it) would be a busy loop

    @property
    def reply_polling(self) -> float:
        value = 50 if self.reply_polling_ms is None else self.reply_polling_ms
        return max(value, 1) / 1000

    @property
    def request_timeout(self) -> float:
        return (self.request_timeout_ms or 30_000) / 1000

    @property
    def lock_duration(self) -> float:
        return self.lock_duration_ms / 1000

    @property
    def reply_collection(self) -> str:
        """The peer's convention: replies go to ``<collection>_replies``."""
        return f"{self.collection_name}_replies"

    def url_options(self) -> set[str]:
        """The URI options named in `url`, lower-case (they win over our defaults)."""
        return {key.lower() for key, _ in parse_qsl(urlsplit(self.url).query)}

    def server(self) -> str:
        """The host list without credentials, for messages and status."""
        return urlsplit(self.url).netloc.rpartition("@")[2]

    def describe(self) -> str:
        return f"mongodb:{self.server()}/{self.database}.{self.collection_name}"
