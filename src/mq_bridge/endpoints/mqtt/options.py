"""Options of the `mqtt` endpoint (see `mq_bridge.endpoints.mqtt`): mq-bridge's `MqttConfig`."""

from __future__ import annotations

from functools import cached_property
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, model_validator

from mq_bridge.config.declarations import OptionError, Options, secret_field
from mq_bridge.endpoints.kit.hosts import host_name_problem
from mq_bridge.endpoints.kit.tls import TlsOptions, tls_required

__all__ = ["DEFAULT_QUEUE_CAPACITY", "MqttOptions", "ServerAddress"]

#: mq-bridge's default for `queue_capacity`.
DEFAULT_QUEUE_CAPACITY = 100
#: Schemes of `url`; the TLS ones turn TLS on (as ``tls.required`` does).
_PORTS = {"tcp": 1883, "mqtt": 1883, "mqtts": 8883, "ssl": 8883, "tls": 8883, "ws": 80, "wss": 443}
#: v5 is the default; mq-bridge writes ``v5``/``v3``, other tools ``V5``, ``5``, ``3.1.1``.
_PROTOCOLS = {"v5": "v5", "V5": "v5", "5": "v5", "v3": "v3", "V3": "v3", "3": "v3", "3.1.1": "v3"}
#: A frozen default: `tls` absent means no TLS (unless the URL says mqtts://).
_NO_TLS = TlsOptions.model_validate({})
ProtocolName = Literal["v5", "V5", "5", "v3", "V3", "3", "3.1.1"]


class ServerAddress:
    """Where `url` points: host, port, transport and the credentials it carries."""

    __slots__ = ("host", "password", "port", "scheme", "username")

    def __init__(self, url: str) -> None:
        if "://" not in url:
            url = f"tcp://{url}"
        parts = urlsplit(url)
        self.scheme = parts.scheme.lower()
        if self.scheme not in _PORTS:
            raise OptionError("url", f"unsupported scheme {self.scheme!r}: use tcp:// or mqtts://")
        if not parts.hostname:
            raise OptionError("url", "needs a host, e.g. tcp://localhost:1883")
        problem = host_name_problem(parts.hostname)
        if problem is not None:
            raise OptionError("url", problem)
        try:
            self.port = parts.port or _PORTS[self.scheme]
        except ValueError:
            raise OptionError("url", "the port is not a number from 1 to 65535") from None
        self.host = parts.hostname
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None

    @property
    def websockets(self) -> bool:
        return self.scheme in ("ws", "wss")


class MqttOptions(Options):
    """An MQTT topic (v3.1.1 or v5): publish to it, or subscribe to it with a session."""

    url: str = Field(
        min_length=1,
        description='MQTT broker URL (e.g., "tcp://localhost:1883"); mqtts:// for TLS. '
        "Credentials in it are treated as secrets.",
    )
    topic: str | None = Field(
        None, min_length=1, description="The MQTT topic (input: a filter, wildcards allowed)."
    )
    username: str | None = Field(None, description="Optional username for authentication.")
    password: str | None = secret_field(None, description="Optional password for authentication.")
    tls: TlsOptions = Field(_NO_TLS, description="TLS configuration.")
    client_id: str | None = Field(
        None,
        description="Client ID. Input default: derived from the route name for a persistent "
        "session, generated for a clean one; outputs add a unique suffix.",
    )
    queue_capacity: int | None = Field(
        None, ge=0, description="Capacity of the internal channel for incoming messages (100)."
    )
    max_inflight: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Most unacknowledged QoS 1/2 messages in flight: the v5 receive maximum "
        "of an input (default: queue_capacity), the publish window of an output.",
    )
    qos: int | None = Field(None, ge=0, le=2, description="Quality of Service (0, 1, 2; 1).")
    clean_session: bool = Field(
        False,
        description="(Consumer only) If true, start with a clean session (subscriber mode, "
        "ephemeral). Default false: a persistent session keeps unacknowledged and queued "
        "messages across reconnects.",
    )
    keep_alive_seconds: int | None = Field(
        None, ge=0, le=65535, description="Keep-alive interval in seconds (20; MQTT: 16 bits)."
    )
    protocol: ProtocolName = Field("v5", description="MQTT protocol version: v5 or v3 (3.1.1).")
    session_expiry_interval: int | None = Field(
        None,
        ge=0,
        le=0xFFFFFFFF,
        description="Session expiry interval in seconds (MQTT v5 only; a persistent session "
        "without it never expires, as in v3).",
    )
    delayed_ack: bool = Field(
        False,
        description="(Consumer only) If true, messages are acknowledged on receipt (auto-ack, "
        "at most once); false: after the batch is committed. Publishers always wait for "
        "PUBACK/PUBCOMP at QoS 1/2.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> MqttOptions:
        _ = self.address  # raises OptionError("url", ...) for a bad URL
        if self.protocol_version == "v3" and self.session_expiry_interval is not None:
            raise OptionError("session_expiry_interval", "is an MQTT v5 option (protocol: v3)")
        return self

    @cached_property
    def address(self) -> ServerAddress:
        return ServerAddress(self.url)

    @property
    def protocol_version(self) -> Literal["v5", "v3"]:
        return "v5" if _PROTOCOLS[self.protocol] == "v5" else "v3"

    @property
    def quality(self) -> int:
        return 1 if self.qos is None else self.qos

    @property
    def capacity(self) -> int:
        return DEFAULT_QUEUE_CAPACITY if not self.queue_capacity else self.queue_capacity

    @property
    def window(self) -> int:
        """Unacknowledged messages in flight (receive maximum / publish window)."""
        return self.max_inflight or self.capacity

    @property
    def keep_alive(self) -> int:
        return 20 if self.keep_alive_seconds is None else self.keep_alive_seconds

    @property
    def uses_tls(self) -> bool:
        return tls_required(self.tls, self.url)

    @property
    def credentials(self) -> tuple[str | None, str | None]:
        """(username, password): the options', else the URL's."""
        address = self.address
        return self.username or address.username, self.password or address.password

    def describe(self) -> str:
        """``mqtt:host:port/topic`` (never the credentials)."""
        address = self.address
        return f"mqtt:{address.host}:{address.port}/{self.topic or ''}"
