"""librdkafka clients for the `kafka` endpoint: settings, errors, topics, the shared producer.

Every client (producer, consumer, admin) is built from one dict of librdkafka settings
(`base_settings`: brokers, SASL, TLS, our logger), the endpoint's defaults, and the user's
``producer_options`` / ``consumer_options`` last, so they win. librdkafka's own log lines go
to the ``mq_bridge.endpoints.kafka.librdkafka`` logger instead of stderr.

Errors: a `KafkaException` becomes `EndpointUnavailableError` (retriable) when the broker
cannot be reached or the error is retriable, `ConfigError` when a setting is wrong (an unknown
librdkafka property names the option it came from; failed SASL names ``kafka.password``),
`EndpointError` otherwise.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn

from mq_bridge.endpoints.kafka.options import ClientSettings, KafkaOptions
from mq_bridge.endpoints.kit.connections import connection_key
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.kit.tls import ssl_context
from mq_bridge.errors import ConfigError, EndpointError, EndpointUnavailableError

if TYPE_CHECKING:
    from confluent_kafka import Producer

__all__ = [
    "CONNECT_TIMEOUT",
    "CONSUMER_DEFAULTS",
    "INTERVAL_COMMITS",
    "ProducerLink",
    "base_settings",
    "client_error",
    "confluent",
    "ensure_topics",
    "producer_key",
    "raise_client_error",
]

log = logging.getLogger("mq_bridge.endpoints.kafka")
librdkafka_log = logging.getLogger("mq_bridge.endpoints.kafka.librdkafka")

#: Seconds `connect()` waits for the brokers (metadata, topic creation) before it fails.
CONNECT_TIMEOUT = 10.0

#: The producer defaults the seed lists; ``producer_options`` override them.
PRODUCER_DEFAULTS: dict[str, str] = {
    "enable.idempotence": "true",
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": "5",
    # A send is bounded: a message without a delivery report after this fails (retriable).
    "message.timeout.ms": "30000",
}
#: Consumer defaults: we commit offset+1 of what was acknowledged, never automatically.
CONSUMER_DEFAULTS: dict[str, str] = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "enable.partition.eof": "false",
}
#: A group member's: librdkafka commits, every 100 ms from its own thread, the offsets the
#: input stored for what was acknowledged (never a record's offset by itself:
#: ``enable.auto.offset.store`` stays false). See `commits`.
INTERVAL_COMMITS: dict[str, str] = {
    "enable.auto.commit": "true",
    "auto.commit.interval.ms": "100",
}

_UNREACHABLE_CODES = {"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE", "_DESTROY"}
_AUTH_CODES = {
    "_AUTHENTICATION",
    "SASL_AUTHENTICATION_FAILED",
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
}


def confluent() -> Any:
    """The confluent_kafka module, or a `ConfigError` naming the extra that installs it."""
    return require_driver(
        "confluent_kafka", endpoint="kafka", extra="kafka", package="confluent-kafka"
    )


def base_settings(options: KafkaOptions, on_error: Callable[[Any], None] | None = None) -> dict:
    """Brokers, SASL, TLS and logging, shared by every client of this endpoint."""
    settings: dict[str, Any] = {
        "bootstrap.servers": options.bootstrap_servers,
        "logger": librdkafka_log,
        "socket.connection.setup.timeout.ms": int(CONNECT_TIMEOUT * 1000),
    }
    if on_error is not None:
        settings["error_cb"] = on_error
    username, password = options.sasl_credentials
    tls = options.tls_required
    if username is not None:
        settings["security.protocol"] = "SASL_SSL" if tls else "SASL_PLAINTEXT"
        settings["sasl.mechanism"] = "PLAIN"
        settings["sasl.username"] = username
        settings["sasl.password"] = password or ""
    elif tls:
        settings["security.protocol"] = "SSL"
    if tls:
        settings.update(_tls_settings(options))
    return settings


def _tls_settings(options: KafkaOptions) -> dict[str, str]:
    """The ``tls`` block as librdkafka's ``ssl.*`` settings (files checked first)."""
    tls = options.tls
    # The kit's context is built only to check the files and name the field at fault.
    ssl_context(tls.model_copy(update={"required": True}), path="kafka.tls")
    settings: dict[str, str] = {}
    if tls.ca_file:
        settings["ssl.ca.location"] = tls.ca_file
    if tls.cert_file:
        settings["ssl.certificate.location"] = tls.cert_file
        settings["ssl.key.location"] = tls.key_file or tls.cert_file
    if tls.cert_password:
        settings["ssl.key.password"] = tls.cert_password
    if tls.accept_invalid_certs:
        settings["enable.ssl.certificate.verification"] = "false"
        settings["ssl.endpoint.identification.algorithm"] = "none"
    return settings


def with_user_settings(settings: dict, defaults: dict[str, Any], user: ClientSettings) -> dict:
    """`settings` + `defaults`, then the user's pairs (which win)."""
    return {**settings, **defaults, **dict(user)}


def make_client(factory: Callable[[dict], Any], settings: dict, option: str) -> Any:
    """`factory(settings)`; a bad librdkafka property becomes a `ConfigError` at `option`."""
    ck = confluent()
    try:
        return factory(settings)
    except (ck.KafkaException, ValueError, TypeError) as error:
        message = f"librdkafka rejected a setting: {_error_text(error)}"
        raise ConfigError(message, path=option) from None


def client_error(error: BaseException, where: str) -> Exception:
    """The bridge's error for a librdkafka error (see the module docstring)."""
    kafka_error = error.args[0] if error.args else None
    name = getattr(kafka_error, "name", lambda: "")()
    text = _error_text(error)
    if name in _AUTH_CODES:
        return ConfigError(
            f"{where}: authentication or authorization failed: {text}", path="kafka.password"
        )
    retriable = getattr(kafka_error, "retriable", lambda: False)()
    if name in _UNREACHABLE_CODES or retriable:
        return EndpointUnavailableError(f"{where}: {text}")
    return EndpointError(f"{where}: {text}")


def raise_client_error(error: BaseException, where: str) -> NoReturn:
    raise client_error(error, where) from error


def _error_text(error: BaseException) -> str:
    kafka_error: Any = error.args[0] if error.args else None
    if hasattr(kafka_error, "str"):
        return f"{kafka_error.str()} ({kafka_error.name()})"
    return str(error)


def admin_client(options: KafkaOptions) -> Any:
    ck = confluent()
    from confluent_kafka.admin import AdminClient

    del ck
    return make_client(AdminClient, base_settings(options), "kafka")


def check_reachable(admin: Any, where: str, timeout: float = CONNECT_TIMEOUT) -> Any:
    """The cluster's metadata (all topics), or `EndpointUnavailableError` within `timeout`."""
    try:
        return admin.list_topics(timeout=timeout)
    except Exception as error:
        raise_client_error(error, f"{where}: cannot reach the brokers")


def ensure_topics(
    options: KafkaOptions, topics: Iterable[str], where: str, create: bool = True
) -> dict[str, int]:
    """Reach the brokers and create the missing `topics` (with `options.partitions`) when
    `create`; their partition counts. Bounded by `CONNECT_TIMEOUT`."""
    ck = confluent()
    from confluent_kafka.admin import NewTopic

    admin = admin_client(options)
    wanted = [topic for topic in topics if not topic.startswith("^")]
    metadata = check_reachable(admin, where)
    missing = [topic for topic in wanted if topic not in metadata.topics]
    if missing and create:
        partitions = options.partitions or 6
        replication = min(3, max(1, len(metadata.brokers)))
        new = [NewTopic(topic, partitions, replication) for topic in missing]
        futures = admin.create_topics(
            new, operation_timeout=CONNECT_TIMEOUT, request_timeout=CONNECT_TIMEOUT
        )
        for topic, future in futures.items():
            try:
                future.result(timeout=CONNECT_TIMEOUT + 1)
            except ck.KafkaException as error:
                if error.args[0].code() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
                    raise_client_error(error, f"{where}: cannot create topic {topic!r}")
            except Exception as error:  # a future's timeout
                message = f"{where}: creating topic {topic!r}: {error!r}"
                raise EndpointUnavailableError(message) from error
            log.info("%s: created topic %r with %d partitions", where, topic, partitions)
        metadata = check_reachable(admin, where)
    return {
        topic: len(metadata.topics[topic].partitions)
        for topic in wanted
        if topic in metadata.topics and not metadata.topics[topic].error
    }


def delete_topic(options: KafkaOptions, topic: str) -> None:
    """Delete `topic`, quietly (best effort, bounded)."""
    try:
        admin = admin_client(options)
        admin.delete_topics([topic], operation_timeout=5, request_timeout=5)[topic].result(6)
    except Exception as error:
        log.debug("could not delete topic %r: %r", topic, error)


def producer_key(options: KafkaOptions) -> tuple[Any, ...]:
    """Connection-level settings only: outputs to different topics share a producer."""
    return connection_key(
        "kafka-producer",
        servers=options.bootstrap_servers,
        credentials=options.sasl_credentials,
        tls=options.tls,
        tls_required=options.tls_required,
        settings=options.producer_settings,
    )


class ProducerLink:
    """One librdkafka producer, replaced when it cannot be trusted to deliver (shared through
    the connection registry: ``shared: true`` gives every output of the process with the
    same settings one link).

    Replaced (`renew`, by the next send) after a *fatal* error (that producer can never send
    again) and after every broker was lost (``_ALL_BROKERS_DOWN``): a broker that lost its
    state (a restarted in-memory broker) no longer knows the idempotent producer's id, and
    librdkafka then bumps the epoch locally and retries until the message times out, instead
    of asking for a new id. A new producer asks for one. Sends in flight on the old producer
    keep it alive until their reports arrive (nothing queued is purged).
    """

    def __init__(self, options: KafkaOptions) -> None:
        self._options = options
        self._lock = threading.Lock()
        self.fatal: str | None = None
        self.suspect = False
        self.producer: Producer = self._new()

    def _new(self) -> Producer:
        ck = confluent()
        settings = with_user_settings(
            base_settings(self._options, self._on_error),
            PRODUCER_DEFAULTS,
            self._options.producer_settings,
        )
        self.fatal = None
        self.suspect = False
        return make_client(ck.Producer, settings, "kafka.producer_options")

    def _on_error(self, error: Any) -> None:
        if error.fatal():
            self.fatal = f"{error.str()} ({error.name()})"
            log.warning("kafka producer failed for good, a new one is made: %s", self.fatal)
        elif error.name() == "_ALL_BROKERS_DOWN":
            self.suspect = True
            log.info("kafka producer: %s", error.str())
        else:
            log.debug("kafka producer: %s", error.str())

    def current(self) -> Producer:
        """The producer to send with: events served first, renewed if it cannot be trusted."""
        producer = self.producer
        producer.poll(0)  # serves error callbacks that came while idle
        if self.fatal is not None or self.suspect:
            producer = self.renew(producer)
        return producer

    def renew(self, broken: Producer) -> Producer:
        """A working producer: a new one if `broken` is still current, else the current."""
        with self._lock:
            if self.producer is broken:
                self.producer = self._new()
            return self.producer

    def close(self) -> None:
        """Deliver what is queued (bounded), then let librdkafka go."""
        remaining = self.producer.flush(5.0)
        if remaining:
            log.warning("kafka producer closed with %d message(s) undelivered", remaining)
