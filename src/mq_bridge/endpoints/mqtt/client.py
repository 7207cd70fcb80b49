"""One paho-mqtt client and its network thread, as the `mqtt` input uses it (and the output
for WebSocket URLs and for requests; otherwise it publishes with `publisher`).

paho runs its network loop on a thread of its own (``loop_start``): it reads and writes the
socket, answers keep-alives, and reconnects with backoff (0.1 s doubling to 5 s) after the
connection is lost. Everything else calls in from the endpoint's threads:

- `open` connects and waits for the CONNACK (and the SUBACK of the subscription, for an
  input): a refused or silent server raises `EndpointUnavailableError` within the timeout;
- `publish` + `wait_published`: a publish is done once its PUBACK/PUBCOMP arrived; a batch
  publishes everything first, then waits for every ack (paho keeps at most `max_inflight`
  unacknowledged on the wire and queues the rest), so a batch costs about one round trip;
- `generation` counts connections: state tied to one connection (the packet ids of received
  messages) is stale after a reconnect, and a publish whose connection dropped is failed at
  once (`EndpointUnavailableError`) instead of waiting for its timeout.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.kit.tls import ssl_context
from mq_bridge.endpoints.mqtt.options import MqttOptions
from mq_bridge.errors import ClosedError, ConfigError, EndpointError, EndpointUnavailableError

__all__ = ["MqttClient", "load_paho"]

log = logging.getLogger("mq_bridge.endpoints.mqtt")

#: The longest wait for a PUBACK/PUBCOMP on a live connection.
ACK_TIMEOUT = 30.0
_PUBACK = 0x40
_WAIT_SLICE = 0.05  # waits wake this often to notice a lost connection or close


def load_paho() -> Any:
    """The paho-mqtt client module, or `ConfigError` naming the extra that installs it."""
    return require_driver("paho.mqtt.client", endpoint="mqtt", extra="mqtt", package="paho-mqtt")


def new_client_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class MqttClient:
    """A connected paho client (see the module docstring). Thread-safe where paho is."""

    def __init__(
        self,
        options: MqttOptions,
        client_id: str,
        *,
        clean_start: bool = True,
        manual_ack: bool = False,
        subscription: tuple[str, int] | None = None,
        on_message: Callable[[Any, int], None] | None = None,
        on_connected: Callable[[int], None] | None = None,
        publish_window: int | None = None,
    ) -> None:
        self.options = options
        self.client_id = client_id
        self.v5 = options.protocol_version == "v5"
        self.generation = 0
        self._clean_start = clean_start
        self._subscription = subscription
        self._on_connected = on_connected
        self._state = threading.Condition()
        self._connected = False
        self._subscribed = 0  # the generation whose SUBACK arrived
        self._refusal: str | None = None
        self._closed = False
        self._extra: dict[str, int] = {}  # reply topics: topic -> QoS
        self._failures: dict[int, str] = {}
        self._batch_lock = threading.Lock()  # mid -> PUBACK reason code of a refused publish
        self._paho = load_paho()
        self._publish_window = publish_window or options.window
        self.client = self._make_client(manual_ack, on_message)

    # -- setup ---------------------------------------------------------------------------

    def _make_client(self, manual_ack: bool, on_message: Callable[[Any, int], None] | None) -> Any:
        paho, options = self._paho, self.options
        address = options.address
        kwargs: dict[str, Any] = {"manual_ack": manual_ack}
        if not self.v5:
            kwargs["clean_session"] = self._clean_start
        client = paho.Client(
            paho.CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=paho.MQTTv5 if self.v5 else paho.MQTTv311,
            transport="websockets" if address.websockets else "tcp",
            **kwargs,
        )
        context = ssl_context(options.tls, options.url, path="mqtt.tls")
        if context is not None:
            client.tls_set_context(context)
        username, password = options.credentials
        if username is not None or password is not None:
            client.username_pw_set(username, password)
        client.max_inflight_messages_set(max(1, self._publish_window))
        client.max_queued_messages_set(0)  # a batch's rest waits in paho for the window
        client.reconnect_delay_set(min_delay=0.1, max_delay=5)
        client.on_connect = self._connected_callback
        client.on_disconnect = self._disconnected_callback
        client.on_subscribe = self._subscribed_callback
        client.on_publish = self._published_callback
        if on_message is not None:
            client.on_message = lambda _c, _u, message: on_message(message, self.generation)
        return client

    def _connect_properties(self) -> Any:
        if not self.v5:
            return None
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        properties = Properties(PacketTypes.CONNECT)
        if not self._clean_start:
            interval = self.options.session_expiry_interval
            properties.SessionExpiryInterval = 0xFFFFFFFF if interval is None else interval
        properties.ReceiveMaximum = max(1, min(self.options.window, 65535))
        return properties

    def open(self, timeout: float) -> None:
        """Connect (and subscribe) within `timeout` seconds, or raise and clean up."""
        address = self.options.address
        self.client.connect_timeout = max(0.1, min(timeout, 10.0))
        deadline = time.monotonic() + timeout
        try:
            v5 = {"clean_start": self._clean_start, "properties": self._connect_properties()}
            self.client.connect(
                address.host, address.port, self.options.keep_alive, **(v5 if self.v5 else {})
            )
        except OSError as error:
            self.client.loop_stop()  # nothing started yet, but a half-made socket is freed
            raise EndpointUnavailableError(
                f"{self.options.describe()}: cannot connect: {error}"
            ) from error
        self.client.loop_start()
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.close()
            raise

    def _wait_ready(self, deadline: float) -> None:
        with self._state:
            while not self._ready():
                if self._refusal is not None:
                    raise EndpointUnavailableError(
                        f"{self.options.describe()}: the broker refused: {self._refusal}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise EndpointUnavailableError(
                        f"{self.options.describe()}: no CONNACK/SUBACK in time"
                    )
                self._state.wait(min(remaining, _WAIT_SLICE))

    def _ready(self) -> bool:
        if not self._connected:
            return False
        return self._subscription is None or self._subscribed == self.generation

    # -- paho callbacks (network thread) -------------------------------------------------

    def _connected_callback(
        self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any
    ) -> None:
        if reason.is_failure:
            with self._state:
                self._refusal = str(reason)
                self._state.notify_all()
            return
        with self._state:
            self._connected = True
            self._refusal = None
            self.generation += 1
            generation = self.generation
            self._state.notify_all()
        # Every time: a clean session has forgotten them, and it is harmless otherwise.
        if self._subscription is not None:
            client.subscribe(*self._subscription)
        for topic, qos in list(self._extra.items()):
            client.subscribe(topic, qos)
        if self._on_connected is not None:
            self._on_connected(generation)

    def _disconnected_callback(
        self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any
    ) -> None:
        with self._state:
            was_connected, self._connected = self._connected, False
            self._state.notify_all()
        if was_connected and not self._closed:
            log.warning("%s: connection lost (%s); reconnecting", self.options.describe(), reason)

    def _subscribed_callback(
        self, client: Any, userdata: Any, mid: int, reasons: Any, properties: Any
    ) -> None:
        with self._state:
            failed = [str(r) for r in reasons if r.is_failure]
            if failed:
                self._refusal = f"subscription refused: {', '.join(failed)}"
            else:
                self._subscribed = self.generation
            self._state.notify_all()

    def _published_callback(
        self, client: Any, userdata: Any, mid: int, reason: Any, properties: Any
    ) -> None:
        if reason.is_failure:  # v5: the broker answered, but did not take the message
            self._failures[mid] = str(reason)

    # -- use -----------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected

    def ensure_connected(self, timeout: float) -> int:
        """The current generation, waiting up to `timeout` for a reconnect in progress."""
        if self._connected:
            return self.generation
        deadline = time.monotonic() + timeout
        with self._state:
            while not self._connected:
                if self._closed:
                    raise ClosedError(f"{self.options.describe()} is closed")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise EndpointUnavailableError(
                        f"{self.options.describe()}: not connected (reconnecting)"
                    )
                self._state.wait(min(remaining, _WAIT_SLICE))
            return self.generation

    def publish(self, topic: str, payload: bytes, qos: int, properties: Any = None) -> Any:
        """Hand one PUBLISH to paho; the returned info is done at its PUBACK/PUBCOMP."""
        return self.client.publish(topic, payload, qos, properties=properties)

    def publish_many(self, topic: str, items: Sequence[tuple[bytes, Any]], qos: int) -> list[Any]:
        """`publish` each (payload, properties), waking the network thread once, not each
        time: every wake-up hands it the GIL, and that ping-pong halves a batch's speed."""
        publish = self.client.publish
        with self._batch_lock:
            wake = getattr(self.client, "_sockpairW", None)
            if wake is None:  # paho changed (or not started): the plain path
                return [publish(topic, payload, qos, properties=p) for payload, p in items]
            self.client._sockpairW = None
            try:
                return [publish(topic, payload, qos, properties=p) for payload, p in items]
            finally:
                self.client._sockpairW = wake
                try:
                    wake.send(b"0")
                except BlockingIOError:  # a wake-up is already pending
                    pass

    def wait_published(self, infos: Sequence[Any], generation: int) -> None:
        """Return once every publish in `infos` was acknowledged; raise if one cannot be."""
        deadline = time.monotonic() + ACK_TIMEOUT
        # The last first: acks come in order, so this thread wakes about once a batch
        # (each wake-up takes the GIL from the network thread reading the other acks).
        for info in reversed(infos):
            while not info.is_published():
                if info.rc not in (0, self._paho.MQTT_ERR_AGAIN):
                    raise EndpointUnavailableError(
                        f"{self.options.describe()}: publish failed: "
                        f"{self._paho.error_string(info.rc)}"
                    )
                self._check_alive(generation, deadline)
                info.wait_for_publish(_WAIT_SLICE)
        if self._failures:
            self._raise_refusals(infos)

    def _check_alive(self, generation: int, deadline: float) -> None:
        if self._closed:
            raise ClosedError(f"{self.options.describe()} is closed")
        if self.generation != generation or not self._connected:
            raise EndpointUnavailableError(
                f"{self.options.describe()}: connection lost before the broker acknowledged"
            )
        if time.monotonic() > deadline:
            raise EndpointUnavailableError(
                f"{self.options.describe()}: no PUBACK within {ACK_TIMEOUT:.0f}s"
            )

    def _raise_refusals(self, infos: Sequence[Any]) -> None:
        refused = [self._failures.pop(info.mid) for info in infos if info.mid in self._failures]
        if refused:
            raise EndpointError(f"{self.options.describe()}: the broker refused: {refused[0]}")

    def ack_many(self, mids: Sequence[int], generation: int) -> None:
        """PUBACK QoS 1 messages of connection `generation` (stale ones are redelivered)."""
        if generation != self.generation or not mids:
            return
        queue = getattr(self.client, "_packet_queue", None)
        if queue is None:  # paho changed: one ack at a time
            for mid in mids:
                self.client.ack(mid, 1)
            return
        # All PUBACKs as one write: paho's ack() costs a queued packet and a wake-up each.
        packet = b"".join(bytes((_PUBACK, 2, mid >> 8, mid & 0xFF)) for mid in mids)
        queue(_PUBACK, packet, 0, 0)

    def subscribe_extra(self, topic: str, callback: Callable[[Any], None], timeout: float) -> None:
        """Subscribe `topic` (QoS 1) with its own callback (reply topics), again after
        every reconnect. The broker handles it before any later publish of ours."""
        self.client.message_callback_add(topic, lambda _c, _u, message: callback(message))
        with self._state:
            self._extra[topic] = 1
        result, _mid = self.client.subscribe(topic, 1)
        if result not in (0, self._paho.MQTT_ERR_NO_CONN):  # NO_CONN: on_connect does it
            raise EndpointUnavailableError(f"{self.options.describe()}: cannot subscribe {topic}")

    def unsubscribe_extra(self, topic: str) -> None:
        with self._state:
            self._extra.pop(topic, None)
        self.client.message_callback_remove(topic)
        self.client.unsubscribe(topic)

    def close(self) -> None:
        """Disconnect and stop the network thread. Idempotent."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            self._state.notify_all()
        try:
            self.client.disconnect()
        except Exception:  # already gone: nothing to say goodbye to
            log.debug("disconnect failed", exc_info=True)
        self.client.loop_stop()


def check_topic_for_publish(topic: str | None, describe: str) -> str:
    """The output's topic: required, and no wildcards."""
    if not topic:
        raise ConfigError("an mqtt output needs a `topic`", path="mqtt.topic")
    if "+" in topic or "#" in topic:
        raise ConfigError(f"cannot publish to a wildcard topic {topic!r}", path="mqtt.topic")
    return topic
