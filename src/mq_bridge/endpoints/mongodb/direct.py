"""Inserts written by the sending thread on a socket of the output's own (the hot path).

pymongo spends ~110 µs of CPU per `insert_one` (sessions, retry bookkeeping, command and
reply objects); an `insert` command built with `bson.encode` and read back with
`bson.decode` costs ~30 µs, and on this project's two-core machine, where the server
competes for the same cores, a send one at a time took ~250 µs instead of ~640 µs. So an
output whose connection needs nothing pymongo negotiates (no credentials, no TLS, no
compression, an acknowledged write concern) inserts through `DirectInserter`; declarations,
`request`, and every other case stay on pymongo. pymongo still finds the server: the link
connects to the address its topology names as the writable primary (or standalone).

The wire: one OP_MSG per insert (section 0: ``{insert, $db, ordered, writeConcern}``,
section 1: ``documents``), the reply's ``n``/``writeErrors``/``writeConcernError`` read
as pymongo does. Duplicate keys count as inserted (the `_id` is the message id: it is
there already). A lost connection, a timeout, or a "not primary" answer drops the link and
fails the unacknowledged documents with the retriable `EndpointUnavailableError`; the next
send connects again (through pymongo's view of who is primary).

    OP_MSG   | length i32 | requestID i32 | responseTo i32 | opCode 2013 i32 |
             | flags u32 = 0 | 0x00 command document | 0x01 size "documents\\0" doc doc ... |
"""

from __future__ import annotations

import itertools
import select
import socket
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import bson
import pymongo

from mq_bridge.endpoints.kit.tls import tls_required
from mq_bridge.endpoints.mongodb.client import CONNECT_TIMEOUT_MS, SOCKET_TIMEOUT_MS
from mq_bridge.endpoints.mongodb.options import MongoDbOptions
from mq_bridge.errors import EndpointError, EndpointUnavailableError, SendError

__all__ = ["DirectInserter", "direct_eligible"]

_HEADER = struct.Struct("<iiii")
_OP_MSG = 2013
_FLAGS = struct.pack("<I", 0)
_DOCUMENTS = b"documents\x00"
_DUPLICATE_KEY = 11000
#: Errors that mean "this server is not (or no longer) the primary": find it again.
_NOT_PRIMARY = frozenset({189, 91, 10107, 11600, 11602, 13435, 13436})
#: URI options that make pymongo negotiate something this link does not do.
_NEGOTIATED = frozenset(
    {"tls", "ssl", "authmechanism", "authsource", "compressors", "loadbalanced", "directconnection"}
)
_REQUEST_IDS = itertools.count(1)


def direct_eligible(options: MongoDbOptions, client: pymongo.MongoClient[Any]) -> bool:
    """Whether inserts may bypass pymongo (see the module docstring)."""
    netloc = urlsplit(options.url).netloc
    if "@" in netloc or options.username is not None or options.password is not None:
        return False
    if tls_required(options.tls, options.url) or options.url_options() & _NEGOTIATED:
        return False
    if urlsplit(options.url).scheme.lower() != "mongodb":
        return False  # mongodb+srv implies TLS
    write_concern = client.write_concern
    return write_concern.acknowledged


class DirectInserter:
    """Inserts into one collection over a socket of its own; one send at a time."""

    def __init__(
        self, client: pymongo.MongoClient[Any], database: str, collection: str, describe: str
    ) -> None:
        self._client = client
        self._describe = describe
        self._lock = threading.Lock()
        self._codec_options = client.codec_options  # encode exactly as pymongo would
        self._sock: socket.socket | None = None
        self._max_message = 48_000_000
        self._max_batch = 100_000
        command: dict[str, Any] = {"insert": collection, "$db": database, "ordered": False}
        concern = client.write_concern.document
        if concern:
            command["writeConcern"] = concern
        self._command = bson.encode(command)

    def insert(self, documents: Sequence[Mapping[str, Any]]) -> None:
        """Insert `documents`; `SendError` names those that failed (by index)."""
        codec_options = self._codec_options
        try:
            encoded = [bson.encode(document, codec_options=codec_options) for document in documents]
        except (bson.errors.InvalidDocument, ValueError, TypeError) as error:
            raise EndpointError(f"{self._describe}: cannot encode a document: {error}") from None
        with self._lock:
            start = 0
            while start < len(encoded):
                end = self._chunk_end(encoded, start)
                try:
                    self._insert_chunk(encoded[start:end], start)
                except SendError as error:
                    failures = dict(error.failures)
                    failures.update({i: _unsent(self._describe) for i in range(end, len(encoded))})
                    raise SendError(failures) from None
                start = end

    def _chunk_end(self, encoded: list[bytes], start: int) -> int:
        size, end = 0, start
        limit = self._max_message - len(self._command) - 64
        while end < len(encoded) and end - start < self._max_batch:
            if end > start and size + len(encoded[end]) > limit:
                break
            size += len(encoded[end])
            end += 1
        return end

    def _insert_chunk(self, encoded: list[bytes], offset: int) -> None:
        sock = self._connected(offset, len(encoded))
        payload = b"".join(encoded)
        section = b"\x01" + struct.pack("<i", 4 + len(_DOCUMENTS) + len(payload)) + _DOCUMENTS
        body = _FLAGS + b"\x00" + self._command + section
        request_id = next(_REQUEST_IDS) & 0x7FFFFFFF
        header = _HEADER.pack(16 + len(body) + len(payload), request_id, 0, _OP_MSG)
        try:
            sock.sendall(header + body + payload)
            reply = self._read_reply(sock)
        except (OSError, ValueError) as error:
            self._drop()
            failure = EndpointUnavailableError(f"{self._describe}: insert failed: {error}")
            raise SendError({offset + i: failure for i in range(len(encoded))}) from None
        self._check(reply, offset, len(encoded))

    def _check(self, reply: Mapping[str, Any], offset: int, count: int) -> None:
        if reply.get("ok") != 1:
            code = reply.get("code")
            message = f"{self._describe}: insert failed: {reply.get('errmsg')}"
            if code in _NOT_PRIMARY:
                self._drop()
                error: EndpointError = EndpointUnavailableError(message)
            else:
                error = EndpointError(message)
            raise SendError({offset + i: error for i in range(count)})
        failures: dict[int, BaseException] = {}
        concern_error = reply.get("writeConcernError")
        if concern_error:
            unavailable = EndpointUnavailableError(
                f"{self._describe}: write concern not satisfied: {concern_error.get('errmsg')}"
            )
            failures = {offset + i: unavailable for i in range(count)}
        for write_error in reply.get("writeErrors", ()):
            code = write_error.get("code")
            if code == _DUPLICATE_KEY:
                failures.pop(offset + int(write_error.get("index", 0)), None)
                continue
            text = f"{self._describe}: insert failed: {write_error.get('errmsg')}"
            if code in _NOT_PRIMARY:
                self._drop()
                failures[offset + int(write_error.get("index", 0))] = EndpointUnavailableError(text)
            else:
                failures[offset + int(write_error.get("index", 0))] = EndpointError(text)
        if failures:
            raise SendError(failures)

    def _connected(self, offset: int, count: int) -> socket.socket:
        sock = self._sock
        if sock is not None and _closed_by_peer(sock):
            self._drop()
            sock = None
        if sock is None:
            try:
                sock = self._open()
            except (OSError, ValueError, pymongo.errors.PyMongoError) as error:
                failure = EndpointUnavailableError(f"{self._describe}: cannot connect: {error}")
                raise SendError({offset + i: failure for i in range(count)}) from None
        return sock

    def _open(self) -> socket.socket:
        address = self._client.primary or self._client.address
        if address is None:
            raise OSError("no writable server known")
        sock = socket.create_connection(address, CONNECT_TIMEOUT_MS / 1000)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(SOCKET_TIMEOUT_MS / 1000)
            hello = _FLAGS + b"\x00" + bson.encode({"hello": 1, "$db": "admin"})
            sock.sendall(_HEADER.pack(16 + len(hello), 0, 0, _OP_MSG) + hello)
            reply = self._read_reply(sock)
            if not reply.get("isWritablePrimary", reply.get("ismaster")):
                raise OSError(f"{address[0]}:{address[1]} is not a writable primary")
            self._max_message = int(reply.get("maxMessageSizeBytes", self._max_message))
            self._max_batch = int(reply.get("maxWriteBatchSize", self._max_batch))
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        return sock

    @staticmethod
    def _read_reply(sock: socket.socket) -> dict[str, Any]:
        header = _read_exactly(sock, 16)
        length, _, _, opcode = _HEADER.unpack(header)
        message = _read_exactly(sock, length - 16)
        if opcode != _OP_MSG or message[4] != 0:
            raise ValueError(f"unexpected reply (opcode {opcode})")
        return bson.decode(message[5:])

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._drop()


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return bytes(data)


def _closed_by_peer(sock: socket.socket) -> bool:
    """True when an idle socket has something to read: the server closed it (EOF/reset)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _unsent(describe: str) -> EndpointUnavailableError:
    return EndpointUnavailableError(f"{describe}: not sent (an earlier part of the batch failed)")
