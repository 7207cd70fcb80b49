"""A connection held for raw pipelined I/O: the hot path of reads, acks and writes.

redis-py's general path (pool checkout, per-argument encoding in Python, response
callbacks, observability hooks) costs more than the round trip itself for a 100-byte XADD,
and its stream replies are reshaped entry by entry in Python (``pairs_to_dict``). A
`CommandChannel` instead holds one connection of the shared client's pool (redis-py still
connects it: TLS, AUTH, SELECT, reconnects), behind a lock, and does its own I/O:

    send  [XADD ...][XADD ...] ... [XADD ...]      one sendall of bytes packed beforehand
    read  <id>       <id>      ... <error>         exactly one reply per command, parsed by
                                                   a hiredis reader straight off the socket
                                                   into a reused buffer; an error reply
                                                   fails only its command

Replies are RESP2 as hiredis builds them: bulk strings as ``bytes``, arrays as lists (a
stream entry is ``[id, [field, value, ...]]``), an error reply as a `hiredis.ReplyError`
(an `Exception`, returned, not raised). Without hiredis, redis-py's own parser reads the
same shapes (an error then is its `ResponseError`).

Every wait is bounded by the connection's socket timeout (`client.REPLY_TIMEOUT`); a
timeout or a broken socket disconnects, so the next call starts on a fresh connection.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["CommandChannel", "pack"]

Command = Sequence[Any]
_BUFFER_SIZE = 1 << 17  # a 500-entry XREADGROUP reply arrives in one or two reads


try:
    import hiredis as _hiredis
except ImportError:  # redis-py's own parser reads the replies instead (slower)
    _hiredis = None  # type: ignore[assignment]


def pack(command: Command) -> bytes:
    """One command in RESP: ``*<argc>`` then each argument as ``$<len>`` + bytes."""
    if _hiredis is not None:
        return _hiredis.pack_command(tuple(command))  # the same bytes, packed in C
    parts = [b"*%d\r\n" % len(command)]
    for argument in command:
        data = argument if isinstance(argument, bytes) else str(argument).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


class CommandChannel:
    """One connection of `client`'s pool, held until `close`."""

    def __init__(self, client: Any) -> None:
        from redis import exceptions

        self._pool = client.connection_pool
        self._connection: Any = None
        self._lock = threading.Lock()
        self.reply_error: type[Exception] = exceptions.ResponseError
        self._broken = (exceptions.ConnectionError, exceptions.TimeoutError, OSError)
        self._reader_type: Any = None if _hiredis is None else _hiredis.Reader
        self._buffer = bytearray(_BUFFER_SIZE)

    def call(self, data: bytes | Iterable[bytes], count: int) -> list[Any]:
        """Send `data` (`count` packed commands, as one ``bytes`` or in chunks, each sent
        as soon as it is made) and return each command's reply, in order.

        A broken connection raises redis-py's ConnectionError/TimeoutError or an OSError.
        When it broke before any reply arrived (a socket the server closed while idle), the
        commands are sent once more on a new connection: for XADDs Redis may then hold some
        entries twice, never none; reads and acks may be repeated safely.
        """
        chunks = iter((data,) if isinstance(data, bytes) else data)
        sent: list[bytes] = []
        with self._lock:
            replies: list[Any] = []
            try:
                self._round_trip(chunks, sent, count, replies)
            except self._broken:
                self._disconnect()
                if replies:
                    raise
                self._round_trip(chunks, sent, count, replies)
            except BaseException:  # out of step with the server (an interrupt): start over
                self._disconnect()
                raise
            return replies

    def call_one(self, command: Command) -> Any:
        """One command's reply; an error reply is raised as redis-py's `ResponseError`."""
        (reply,) = self.call(pack(command), 1)
        if isinstance(reply, Exception):
            if isinstance(reply, self.reply_error):
                raise reply
            raise self.reply_error(str(reply))
        return reply

    def _round_trip(
        self, chunks: Iterator[bytes], sent: list[bytes], count: int, replies: list[Any]
    ) -> None:
        """Send what `sent` holds (a retry), then the rest of `chunks`; read the replies."""
        connection = self._connection
        if connection is None:
            connection = self._connection = self._pool.get_connection()
        if connection._sock is None:
            connection.connect()
        sendall = connection._sock.sendall
        for chunk in sent:
            sendall(chunk)
        for chunk in chunks:
            sent.append(chunk)
            sendall(chunk)
        if self._reader_type is None:
            self._read_with_redis_py(connection, count, replies)
            return
        reader = self._reader_type()
        feed, gets, append = reader.feed, reader.gets, replies.append
        buffer, recv_into = self._buffer, connection._sock.recv_into
        while len(replies) < count:
            size = recv_into(buffer)
            if not size:
                raise self._broken[0]("the server closed the connection")
            feed(buffer, 0, size)
            # Only `count` replies can be on their way: take whatever is complete.
            while (reply := gets()) is not False:
                append(reply)

    def _read_with_redis_py(self, connection: Any, count: int, replies: list[Any]) -> None:
        read, error = connection.read_response, self.reply_error
        for _ in range(count):
            try:
                replies.append(read())
            except error as reply_error:  # the connection stays in step: read the next
                replies.append(reply_error)

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.disconnect()

    def close(self) -> None:
        """Give the connection back to the pool. Idempotent."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.release(connection)
