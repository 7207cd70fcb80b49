"""Options of the `kafka` endpoint (see `mq_bridge.endpoints.kafka`).

Names, types, defaults and meanings are mq-bridge's ``KafkaConfig`` (mq-bridge-py 0.3.2, and
1.2.0's additions `source_metadata`, `create_topic`, `partition_key` and source topic lists),
so a peer's config runs unchanged. Where the peer's schema allows ``null`` for an option with
a documented default, ``null`` means that default here too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from pydantic import Field, field_validator, model_validator

from mq_bridge.config.declarations import OptionError, Options, secret_field
from mq_bridge.endpoints.kit.tls import TlsOptions

__all__ = ["ClientSettings", "KafkaOptions"]

#: URL schemes accepted in front of a broker address (all mean the Kafka protocol; the
#: TLS ones turn TLS on as ``tls.required`` does).
_SCHEMES = frozenset({"kafka", "tcp", "plaintext", "ssl", "tls", "kafka+ssl", "sasl_ssl", "sasl"})
_TLS_SCHEMES = frozenset({"ssl", "tls", "kafka+ssl", "sasl_ssl"})
#: Kafka's legal topic names (a regex source topic starts with ``^`` instead).
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: librdkafka settings that the endpoint owns: overriding them would break what it promises.
_OWNED = {
    "bootstrap.servers": "url",
    "metadata.broker.list": "url",
    "group.id": "group_id",
    "sasl.username": "username",
    "sasl.password": "password",
}
_NO_AUTO_COMMIT = ("enable.auto.commit", "enable.auto.offset.store")

ClientSettings = tuple[tuple[str, str], ...]


class KafkaOptions(Options):
    """Kafka topics: a consumer group (or an ephemeral subscriber) in, an idempotent producer
    out (mq-bridge's ``KafkaConfig``)."""

    url: str = Field(
        min_length=1,
        description="Comma-separated list of Kafka broker URLs (host:port; a kafka://, ssl:// "
        "or sasl_ssl:// scheme is accepted). If it contains userinfo, it is treated as a "
        "secret and used as the SASL username/password.",
    )
    topic: str | list[str] | None = Field(
        None,
        description="The topic to produce to or consume from (default: the route's name). A "
        "source also takes a list (array or comma-separated) or a `^regex`.",
    )
    username: str | None = Field(None, description="Optional username for SASL authentication.")
    password: str | None = secret_field(
        None, description="Optional password for SASL authentication."
    )
    tls: TlsOptions = Field(
        default_factory=lambda: TlsOptions.model_validate({}), description="TLS configuration."
    )
    group_id: str | None = Field(
        None,
        min_length=1,
        description="(Consumer only) Consumer group ID; a new group starts at the earliest "
        "offset. If not provided, the consumer acts in **Subscriber mode**: it uses a unique, "
        "ephemeral group ID and receives only messages published after it connected.",
    )
    source_metadata: bool = Field(
        False,
        description="(Consumer only) Include the `mqb.src.kafka_*` source positions (as "
        "MQB_SOURCE_METADATA=1 does). Defaults to false.",
    )
    delayed_ack: bool = Field(
        False,
        description="(Publisher only) If true, do not wait for the broker's acknowledgement "
        "(the delivery report) before a send returns. Defaults to false.",
    )
    producer_options: list[tuple[str, str | int | float | bool]] | None = Field(
        None,
        description="(Publisher only) Additional librdkafka producer configuration options "
        "(key-value pairs); they override the endpoint's defaults (idempotence, acks=all, lz4, "
        "linger.ms 5).",
    )
    consumer_options: list[tuple[str, str | int | float | bool]] | None = Field(
        None,
        description="(Consumer only) Additional librdkafka consumer configuration options "
        "(key-value pairs), e.g. session.timeout.ms.",
    )
    shared: bool | None = Field(
        True,
        description="(Publisher only) Share one producer per connection (default: true); false "
        "gives a dedicated producer.",
    )
    partitions: int | None = Field(
        6,
        ge=1,
        le=2**31 - 1,
        description="Partition count used when auto-creating the topic (default: 6). Higher "
        "values raise write/consume parallelism; ordering is only guaranteed per partition "
        "key (message_id), not across the whole topic. Ignored if the topic exists.",
    )
    create_topic: bool | None = Field(
        True,
        description="Create the topic at start if it is missing (default: true).",
    )
    partition_key: str | None = Field(
        None,
        min_length=1,
        description="(Publisher only) Name of a metadata field whose value is used as the Kafka "
        "record key (drives partitioning/ordering). Unset, or absent on a given message, falls "
        "back to the message id. Default unset.",
    )

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset({"shared", "partitions", "create_topic"})

    @field_validator("producer_options", "consumer_options", mode="before")
    @classmethod
    def _mapping_as_pairs(cls, value: Any) -> Any:
        """A mapping is accepted too (``{linger.ms: 0}``), as the pairs it holds."""
        if isinstance(value, Mapping):
            return list(value.items())
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KafkaOptions:
        servers = [server.strip() for server in self.url.split(",")]
        for server in servers:
            _check_server(server)
        for topic in self.topics:
            if not topic.startswith("^") and not _TOPIC.fullmatch(topic):
                raise OptionError(
                    "topic",
                    f"not a legal Kafka topic name: {topic!r} (letters, digits, '.', '_', '-'; "
                    "at most 249)",
                )
            if topic.startswith("^"):
                try:
                    re.compile(topic)
                except re.error as error:
                    raise OptionError("topic", f"not a valid regex {topic!r}: {error}") from None
        if self.password is not None and self.sasl_credentials[0] is None:
            raise OptionError("password", "a password needs a `username`")
        for name in ("producer_options", "consumer_options"):
            _check_client_options(name, getattr(self, name) or ())
        return self

    # --- derived values -------------------------------------------------------------------

    @property
    def topics(self) -> list[str]:
        """The topics as given (a list, or a comma-separated string); [] when unset."""
        if self.topic is None:
            return []
        items = self.topic if isinstance(self.topic, list) else self.topic.split(",")
        return [item.strip() for item in items if item.strip()]

    @property
    def bootstrap_servers(self) -> str:
        """host:port,... without schemes or credentials."""
        return ",".join(_host_port(server.strip()) for server in self.url.split(","))

    @property
    def tls_required(self) -> bool:
        schemes = {_scheme(server.strip()) for server in self.url.split(",")}
        return self.tls.required or bool(schemes & _TLS_SCHEMES)

    @property
    def sasl_credentials(self) -> tuple[str | None, str | None]:
        """(username, password): the options, else the URL's userinfo."""
        if self.username is not None:
            return self.username, self.password
        for server in self.url.split(","):
            parts = urlsplit(_with_scheme(server.strip()))
            if parts.username is not None:
                password = None if parts.password is None else unquote(parts.password)
                return unquote(parts.username), self.password or password
        return None, self.password

    @property
    def producer_settings(self) -> ClientSettings:
        return _as_strings(self.producer_options or ())

    @property
    def consumer_settings(self) -> ClientSettings:
        return _as_strings(self.consumer_options or ())

    def describe(self, topics: str) -> str:
        """kafka:host:port/topic (no credentials)."""
        return f"kafka:{self.bootstrap_servers.split(',')[0]}/{topics}"


def _with_scheme(server: str) -> str:
    return server if "://" in server else f"kafka://{server}"


def _scheme(server: str) -> str:
    return server.split("://", 1)[0].lower() if "://" in server else "kafka"


def _host_port(server: str) -> str:
    parts = urlsplit(_with_scheme(server))
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{host}:{parts.port or 9092}"


def _check_server(server: str) -> None:
    if not server:
        raise OptionError("url", "an empty broker address in the list")
    if "@" in server and "://" not in server:
        # Config redaction recognises credentials in URLs by their scheme.
        raise OptionError(
            "url", "credentials in the URL need a scheme: kafka://user:password@host:port"
        )
    if _scheme(server) not in _SCHEMES:
        schemes = ", ".join(f"{scheme}://" for scheme in sorted(_SCHEMES))
        raise OptionError(
            "url", f"unsupported scheme {_scheme(server)!r}: use host:port or {schemes}"
        )
    try:
        parts = urlsplit(_with_scheme(server))
        port = parts.port
    except ValueError as error:
        raise OptionError("url", f"not a broker address ({error})") from None
    if not parts.hostname:
        raise OptionError("url", f"the broker address {server.split('@')[-1]!r} has no host")
    if port == 0:
        raise OptionError("url", "port 0 is not a broker port")


def _check_client_options(name: str, pairs: Any) -> None:
    for key, value in pairs:
        if key in _OWNED:
            raise OptionError(name, f"{key!r} is set by the `{_OWNED[key]}` option, not here")
        if key in _NO_AUTO_COMMIT and str(value).lower() in {"true", "1"}:
            raise OptionError(
                name,
                f"{key}=true would commit offsets before messages are handled; the endpoint "
                "commits each acknowledged batch itself (at least once)",
            )


def _as_strings(pairs: Any) -> ClientSettings:
    def text(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return tuple((str(key), text(value)) for key, value in pairs)
