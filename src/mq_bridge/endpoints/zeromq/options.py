"""Options of the `zeromq` endpoint (see `mq_bridge.endpoints.zeromq`).

The names, types and meanings are mq-bridge's ``ZeroMqConfig``: 0.3.2's `url`,
`socket_type`, `topic`, `bind`, `internal_buffer_size`, and 1.2.0's `format`, `backend`,
`request_timeout_ms`. The default `format` is 0.3.2's JSON envelope (1.2.0 defaults to
`raw_framed`); `max_message_size` is ours.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from mq_bridge.config.declarations import MAX_MILLISECONDS, OptionError, Options

__all__ = [
    "INPUT_SOCKETS",
    "OUTPUT_SOCKETS",
    "SocketType",
    "WireFormat",
    "ZeroMqOptions",
]

SocketType = Literal["push", "pull", "pub", "sub", "req", "rep"]
WireFormat = Literal["json", "raw", "raw_framed"]
Backend = Literal["zmq", "omq", "try_omq"]

#: The socket types each side can be, the first being the default.
INPUT_SOCKETS: tuple[SocketType, ...] = ("pull", "sub", "rep")
OUTPUT_SOCKETS: tuple[SocketType, ...] = ("push", "pub", "req")

_SCHEMES = frozenset({"tcp", "ipc", "inproc", "pgm", "epgm", "ws", "wss"})
_DEFAULT_MAX_MESSAGE_SIZE = 64 * 1024 * 1024


class ZeroMqOptions(Options):
    """ZeroMQ sockets: push/pull, pub/sub and req/rep (mq-bridge's ``ZeroMqConfig``)."""

    model_config = {**Options.model_config, "title": "ZeroMqConfig"}  # mq-bridge's $defs name

    url: str = Field(
        min_length=1,
        description='The ZeroMQ URL (e.g. "tcp://127.0.0.1:5555"); with `bind`, the address '
        'to listen on ("tcp://*:5555" for every interface).',
    )
    socket_type: SocketType | None = Field(
        None,
        description="The socket type (push, pull, pub, sub, req, rep). Default: pull for an "
        "input, push for an output.",
    )
    topic: str | None = Field(
        None,
        description="Topic: the prefix a SUB socket filters on, or the topic frame a PUB "
        "socket sends first (none: a SUB receives everything, a PUB sends no topic frame).",
    )
    bind: bool = Field(False, description="If true, bind to the address. If false, connect.")
    internal_buffer_size: int | None = Field(
        None,
        ge=0,
        description="Accepted for mq-bridge configs; libzmq's high-water marks (1000 messages "
        "per peer) bound the queues here.",
    )
    format: WireFormat | None = Field(
        "json",
        description="Wire format: `json` (default, mq-bridge-py 0.3.2's) sends each batch as one "
        "frame holding a JSON array of canonical messages (id, payload, metadata); `raw` sends "
        "the payload bytes, one message per frame (no metadata); `raw_framed` (mq-bridge 1.2.0's "
        "default) sends a JSON metadata frame followed by the payload frame. REQ/REP replies "
        "are always a JSON array of canonical messages.",
    )
    backend: Backend | None = Field(
        "try_omq",
        description="Accepted for mq-bridge 1.2.0 configs: this endpoint always uses libzmq "
        "(pyzmq), which speaks the same ZMTP protocol as either of the peer's backends.",
    )
    request_timeout_ms: int | None = Field(
        30_000,
        ge=1,
        le=MAX_MILLISECONDS,
        description="(Publisher) Timeout in ms for one request/reply exchange, and for a send "
        "waiting for a peer to take its messages (no connected peer, or its queue full).",
    )
    max_message_size: int | None = Field(
        _DEFAULT_MAX_MESSAGE_SIZE,
        ge=1,
        description="(Consumer) The largest message in bytes a peer may send (libzmq "
        "`ZMQ_MAXMSGSIZE`): a peer that sends a larger one is disconnected. Default 64 MiB.",
    )

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset(
        {"format", "backend", "request_timeout_ms", "max_message_size"}
    )
    #: A topic is a byte prefix (libzmq takes it with its length), so it may hold NUL.
    NUL_ALLOWED: ClassVar[frozenset[str]] = frozenset({"topic"})

    @model_validator(mode="after")
    def _consistent(self) -> ZeroMqOptions:
        scheme, separator, address = self.url.partition("://")
        if not separator or scheme.lower() not in _SCHEMES:
            schemes = ", ".join(f"{name}://" for name in sorted(_SCHEMES))
            raise OptionError("url", f"not a ZeroMQ endpoint {self.url!r}: use {schemes}")
        if not address:
            raise OptionError("url", f"the URL {self.url!r} has no address")
        return self

    @property
    def wire_format(self) -> WireFormat:
        return self.format or "json"

    @property
    def request_timeout(self) -> float:
        return (self.request_timeout_ms or 30_000) / 1000

    def socket_for(self, side: Literal["input", "output"]) -> SocketType:
        """The socket type on `side`; `OptionError` when that side cannot be this type."""
        allowed = INPUT_SOCKETS if side == "input" else OUTPUT_SOCKETS
        socket_type = self.socket_type or allowed[0]
        if socket_type not in allowed:
            kinds = ", ".join(allowed)
            raise OptionError(
                "socket_type", f"a zeromq {side} is one of {kinds}, not {socket_type!r}"
            )
        return socket_type

    def describe(self, side: Literal["input", "output"]) -> str:
        mode = "bind" if self.bind else "connect"
        kind = self.socket_type or (INPUT_SOCKETS if side == "input" else OUTPUT_SOCKETS)[0]
        return f"zeromq+{kind}:{mode}:{self.url}"
