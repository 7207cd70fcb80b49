"""Reading a JetStream pull consumer: batches on request, acks per message.

A `receive(max, timeout)` asks the consumer for what it has right now, up to `max`
(``{"batch": max, "no_wait": true}``: the server delivers that many, or what it has and a
408/404 status). Only when that is nothing does it wait, for one message
(``{"batch": 1, "expires": ...}``, re-asked every `LONG_POLL` seconds so a request the
server forgot across a restart costs little), and then asks for the rest of the batch the
same way. So `poll(max=500)` over a backlog returns 500 messages, and an idle input costs
one request a second.

Every pull request has its own reply subject (``<inbox>.<n>``), but the server delivers
the messages themselves with their own subjects: they belong to whichever request is
waiting. A message for a request that gave up (a timeout or `interrupt()`) is kept and
handed out first by the next `receive`, so nothing delivered is dropped; what is left at
`close` is released with a Nak, and so is what was handed out and never acked or nacked.

With `REQUEST_AHEAD` (off: see there), after a full batch the next no-wait request goes
out at once, so the next batch is on its way while the caller works on this one; `receive`
takes it first. What it
delivered is never dropped: a `nack` releases it too (after the nacked messages, so the
order holds), and so does `close`.

`ack` sends ``+ACK`` for each message, `nack` ``-NAK`` (in delivery order, so they come
back in order), in one write, then waits for the server to have read them (a flush).

The requests, deliveries and acks go over a `link.Link`: on plain ``nats://`` servers the
caller's thread writes and reads the socket itself (`direct`), with no hop to the loop
thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from mq_bridge.endpoints.base import Batch, EndpointStatus
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.nats import jetstream
from mq_bridge.endpoints.nats.codec import ACK, NAK, RawMessage, ack_commands, decode_delivery
from mq_bridge.endpoints.nats.connection import API_TIMEOUT, FastClient, run
from mq_bridge.endpoints.nats.link import Link
from mq_bridge.errors import EndpointError, EndpointUnavailableError

__all__ = ["PullReader"]

log = logging.getLogger("mq_bridge.endpoints.nats")

LONG_POLL = 1.0  # seconds a waiting pull request lives at the server
#: Send the next no-wait request right after a full batch (overlaps the next fetch with the
#: caller's work). Off: under load, a reader closed with such a request in flight left its
#: messages delivered and un-Nak'ed (seen in the contract suite: the consumer's ack-pending
#: count held them for ack_wait, 30 s, while the request itself ended with a "no messages"
#: status), so the next reader did not get them. Until that server interplay is understood,
#: correctness wins over the overlap.
REQUEST_AHEAD = False
NO_WAIT_BOUND = 2.0  # longest wait for the answer to a no-wait request
_HEARTBEAT = b"100"


class _Pull:
    """One pull request waiting for its messages (filled on the reading thread)."""

    __slots__ = ("batch", "done", "generation", "raw", "status", "suffix")

    def __init__(self, suffix: bytes, batch: int, generation: int) -> None:
        self.suffix = suffix
        self.generation = generation  # the link's: answered only on the same connection
        self.batch = batch
        self.raw: list[RawMessage] = []
        self.status: bytes | None = None
        self.done = threading.Event()


class PullReader:
    """Pulls batches from one JetStream consumer over the endpoint's own inbox."""

    def __init__(
        self, client: FastClient, link: Link, stream: str, consumer: str, ephemeral: bool
    ) -> None:
        self._client, self._link = client, link
        self.stream, self.consumer, self._ephemeral = stream, consumer, ephemeral
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}".encode()
        self._inbox = link.new_inbox().encode()
        self._lock = threading.Lock()
        self._current: _Pull | None = None
        self._late: list[RawMessage] = []
        # Handed out, neither acked nor nacked (by batch): Nak'ed at close.
        self._outstanding: dict[int, list[bytes]] = {}
        self._requests = 0
        self._wakeup = Wakeup()  # a flag here: a pull waits on its own `done` event
        self._failure: EndpointUnavailableError | None = None
        self._ahead: _Pull | None = None  # a no-wait request sent after a full batch
        self._subscription: Any = None

    def start(self) -> None:
        self._subscription = self._link.subscribe(f"{self._inbox.decode()}.*", self._on_message)

    def receive(self, max_messages: int, timeout: float | None, tag_source: bool) -> Batch:
        """Up to `max_messages`, waiting at most `timeout` for the first (see the module)."""
        wakeup = self._wakeup
        self._failure = None
        deadline = None if timeout is None else time.monotonic() + timeout
        self._link.ensure(deadline)
        raw = self._take_late(max_messages)
        if self._ahead is not None:
            raw += self._take_ahead(max_messages - len(raw))
        if len(raw) < max_messages:
            raw += self._pull(max_messages - len(raw), None, NO_WAIT_BOUND)
        while not raw and not wakeup.pending and self._failure is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining < 0.001:
                break
            expires = LONG_POLL if remaining is None else min(LONG_POLL, remaining)
            raw = self._pull(1, expires, expires if remaining is None else remaining)
            raw += self._take_late(max_messages - len(raw))
            if raw and len(raw) < max_messages:
                raw += self._pull(max_messages - len(raw), None, NO_WAIT_BOUND)
        interrupted = wakeup.consume()  # what came answers it as well
        if not raw and self._failure is not None:
            raise self._failure
        if REQUEST_AHEAD and len(raw) == max_messages and not interrupted:
            self._ahead = self._request(max_messages, None)  # a backlog: the next batch
        messages = [decode_delivery(item, tag_source) for item in raw]
        replies = [item[1] for item in raw]
        if replies:
            self._outstanding[id(replies)] = replies
        return Batch(messages, replies)

    def ack(self, batch: Batch, kind: bytes = ACK) -> None:
        """Acknowledge (or, with `NAK`, release) every message of `batch`."""
        replies: list[bytes] = batch.token or []
        self._outstanding.pop(id(replies), None)
        if kind == NAK and replies:
            # Delivered after them, not handed out: released too, so they come back after
            # the nacked ones, in order.
            replies = replies + [item[1] for item in self._unread()]
        if not replies:
            return
        what = "ack" if kind != NAK else "nak"
        try:
            self._link.write(ack_commands(replies, kind))
            self._link.flush(API_TIMEOUT)
        except EndpointError as error:
            # Unconfirmed acks are not lost work: JetStream redelivers after ack_wait.
            log.warning("nats: %s of %s may not have reached the server: %r", what, self, error)

    def nack(self, batch: Batch) -> None:
        self.ack(batch, NAK)

    def status(self, target: str) -> EndpointStatus:
        details: dict[str, Any] = {"stream": self.stream, "consumer": self.consumer}
        try:
            info = run(jetstream.consumer_info(self._client, self.stream, self.consumer), target)
        except EndpointError as error:
            return EndpointStatus(False, target, error=str(error), details=details)
        details.update(
            ack_pending=info.num_ack_pending,
            redelivered=info.num_redelivered,
            waiting=info.num_waiting,
        )
        healthy = bool(self._client.is_connected)
        return EndpointStatus(healthy, target, pending=info.num_pending, details=details)

    def interrupt(self) -> None:
        self._wakeup.interrupt()
        with self._lock:  # `_request` checks `pending` under it: no pull slips between
            pull = self._current
        if pull is not None:
            pull.done.set()

    def stop(self) -> None:
        """Unsubscribe, then release what was delivered but never handed out."""
        try:
            ahead = self._ahead
            if ahead is not None and self._link.is_connected:
                # A no-wait request always ends (its messages, or a status), but the server
                # answers it asynchronously: what it sends after the UNSUB is dropped on the
                # way and only comes back after ack_wait. So let it end first (bounded).
                self._link.wait(ahead.done, API_TIMEOUT)
            if self._subscription is not None and self._link.is_connected:
                self._link.unsubscribe(self._subscription)
                # What the server sent before it read the UNSUB arrives before the PONG:
                # read it now, so the Nak below releases it too (else it would wait out
                # the consumer's ack_wait, 30 s, before anyone else got it).
                self._link.flush(API_TIMEOUT)
        except EndpointError as error:
            log.warning("nats: unsubscribing the consumer %s: %s", self.consumer, error)
        late = self._unread()
        unacked = [reply for replies in self._outstanding.values() for reply in replies]
        self._outstanding.clear()
        try:
            if late or unacked:
                self.ack(Batch([], unacked + [item[1] for item in late]), NAK)
            if self._ephemeral:
                delete = jetstream.delete_consumer(self._client, self.stream, self.consumer)
                run(delete, "nats: deleting the subscriber's consumer")
        except EndpointError as error:
            log.warning("nats: closing the consumer %s: %s", self.consumer, error)
        finally:
            self._link.close()

    # -- on the caller's thread ------------------------------------------------------------

    def _pull(self, batch: int, expires: float | None, wait: float) -> list[RawMessage]:
        """Ask for `batch` messages (no wait, or waiting `expires` s at the server); what
        arrived within `wait` seconds."""
        pull = self._request(batch, expires)
        return self._collect(pull, wait) if pull is not None else []

    def _request(self, batch: int, expires: float | None) -> _Pull | None:
        """Send a pull request, the one messages now go to; None (and `_failure`) when the
        connection is lost."""
        self._requests += 1
        pull = _Pull(b".%d" % self._requests, batch, self._link.generation)
        if expires is None:
            body = b'{"batch":%d,"no_wait":true}' % batch
        else:
            body = b'{"batch":%d,"expires":%d}' % (batch, int(expires * 1e9))
        reply = self._inbox + pull.suffix
        command = b"PUB %s %s %d\r\n%s\r\n" % (self._next_subject, reply, len(body), body)
        with self._lock:
            self._current = pull
            if self._wakeup.pending:  # interrupted: end this pull's wait at once
                pull.done.set()
        try:
            self._link.write(command)
        except EndpointUnavailableError as error:
            self._failure = error
            self._collect(pull, 0)
            return None
        pull.generation = self._link.generation  # after a reconnect the write made
        return pull

    def _collect(self, pull: _Pull, wait: float) -> list[RawMessage]:
        """What `pull` got within `wait` seconds; later messages go to `_late`."""
        try:
            if wait > 0:
                self._link.wait(pull.done, wait)
        except EndpointUnavailableError as error:
            self._failure = error
        with self._lock:
            if self._current is pull:
                self._current = None
            raw = pull.raw
        if pull.status not in (None, b"404", b"408", b"409"):
            log.debug("nats: pull request ended with status %s", pull.status)
        return raw

    def _take_ahead(self, limit: int) -> list[RawMessage]:
        """What the request sent ahead (after a full batch) got, up to `limit`; the rest
        goes back to `_late`."""
        with self._lock:
            ahead, self._ahead = self._ahead, None
        if ahead is None:
            return []
        lost = ahead.generation != self._link.generation  # redelivered after ack_wait
        raw = self._collect(ahead, 0 if lost else NO_WAIT_BOUND)
        if len(raw) > limit:
            with self._lock:
                self._late[:0] = raw[limit:]
            raw = raw[:limit]
        return raw

    def _unread(self) -> list[RawMessage]:
        """Everything delivered and not handed out (the request sent ahead answered)."""
        ahead = self._take_ahead(1 << 30) if self._link.is_connected else []
        with self._lock:
            late, self._late = self._late, []
        return late + ahead

    def _take_late(self, limit: int) -> list[RawMessage]:
        if not self._late or limit <= 0:
            return []
        with self._lock:
            taken, self._late = self._late[:limit], self._late[limit:]
        return taken

    # -- on the reading thread ---------------------------------------------------------------

    def _on_message(
        self, subject: bytes, reply: bytes, payload: bytes, header: bytes | None
    ) -> None:
        if header is not None and not payload and header.startswith(b"NATS/1.0 "):
            status: bytes | None = header[9:12]
        else:
            status = None
        with self._lock:
            pull = self._current
            if status is not None:
                if status != _HEARTBEAT and pull is not None and subject.endswith(pull.suffix):
                    pull.status = status
                    self._current = None
                    pull.done.set()
                return
            if pull is None:
                self._late.append((subject, reply, payload, header))
                return
            pull.raw.append((subject, reply, payload, header))
            if len(pull.raw) >= pull.batch:
                self._current = None
                pull.done.set()

    def __repr__(self) -> str:
        return f"PullReader({self.stream}/{self.consumer})"
