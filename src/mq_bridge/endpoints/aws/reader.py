"""The SQS long-poller behind the aws input: one thread per input, polling on demand.

SQS waits in whole seconds (``WaitTimeSeconds`` 0-20) and an HTTP call cannot be cut
short, while `receive` must honour any timeout and `interrupt()` at once. So a thread of
the input's own makes the calls and `receive` waits for its results on a condition::

    receive(max, timeout)  --want max-->   reader thread: a *round* of ReceiveMessage calls
          ^                                  (the first long-polls `wait_time_seconds`, the
          |                                  next ones take what is there, 10 at a time,
          +-----buffer of decoded messages--  until `max` or a short answer)

The reader polls only while a `receive` waits (no prefetch beyond what was asked), so an
idle consumer keeps one long poll open, as the peer does. A round that outlives its
`receive` (a timeout, an interrupt) leaves its messages in the buffer for the next one; any
that waited there longer than half the queue's visibility timeout are given back
(visibility 0) rather than handed out late, and `stop` gives back the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mq_bridge.endpoints.aws.client import SqsCall, raise_translated
from mq_bridge.endpoints.aws.codec import decode
from mq_bridge.endpoints.aws.destinations import Queue
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import ClosedError
from mq_bridge.message import Message

__all__ = ["QueueReader", "Received"]

log = logging.getLogger("mq_bridge.endpoints.aws")

#: After a failed call, the reader waits this long before the next (a receive raises the
#: error meanwhile; the route reconnects).
_ERROR_PAUSE = 1.0
#: With ``wait_time_seconds: 0`` an empty queue is polled at most this often.
_SHORT_POLL_PAUSE = 0.1


@dataclass(slots=True)
class Received:
    message: Message
    receipt_handle: str
    fetched_at: float


class QueueReader:
    """Receives from `queue` on a thread of its own; see the module docstring.

    `release(handles)` makes messages visible again (used for stale and left-over ones);
    `done()` is called once when the thread ends (the input releases its connection then).
    """

    def __init__(
        self,
        call: SqsCall,
        queue: Queue,
        batch_limit: int,
        long_poll_seconds: int,
        source_metadata: bool,
        release: Callable[[list[str]], None],
        done: Callable[[], None],
        where: str,
    ) -> None:
        self._call = call
        self._queue = queue
        self._batch_limit = batch_limit
        self._long_poll = long_poll_seconds
        self._source_metadata = source_metadata
        self._release = release
        self._done = done
        self._where = where
        # (A queue with visibility timeout 0 hides nothing: no message goes stale here.)
        self._stale_after = queue.visibility_timeout / 2 or float("inf")
        self._cond = threading.Condition()
        self._buffer: deque[Received] = deque()
        self._want = 0
        self._rounds = 0
        self._wakeup = Wakeup(self._cond)
        self._error: BaseException | None = None
        self._stopped = False
        self._request: dict[str, Any] = {
            "QueueUrl": queue.url,
            "MessageAttributeNames": ["All"],
        }
        self._thread = threading.Thread(target=self._run, name="mq-bridge-sqs-reader", daemon=True)
        self._thread.start()

    # --- the caller's side ------------------------------------------------------------

    def take(self, max_messages: int, timeout: float | None) -> list[Received]:
        """Up to `max_messages`, waiting at most `timeout` s for a round to bring some."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self._stopped:
                raise ClosedError(f"{self._where} input is closed")
            if not self._buffer:
                self._wait_for_round(max_messages, deadline)
            else:
                self._wakeup.consume()  # what is buffered answers an interrupt
            taken = [self._buffer.popleft() for _ in range(min(max_messages, len(self._buffer)))]
        return self._fresh(taken)

    def _wait_for_round(self, max_messages: int, deadline: float | None) -> None:
        rounds = self._rounds

        def ready() -> bool:
            buffered = len(self._buffer)
            return (
                self._error is not None
                or self._stopped
                or buffered >= max_messages
                or (buffered > 0 and rounds != self._rounds)
            )

        self._want = max_messages
        self._cond.notify_all()
        try:
            self._wakeup.wait_until(ready, deadline)
            if self._error is not None:
                error, self._error = self._error, None
                raise error
        finally:
            self._want = 0

    def _fresh(self, taken: list[Received]) -> list[Received]:
        """`taken` without messages that waited too long in the buffer (given back)."""
        if not taken or time.monotonic() - taken[0].fetched_at < self._stale_after:
            return taken
        limit = time.monotonic() - self._stale_after
        stale = [r.receipt_handle for r in taken if r.fetched_at < limit]
        if stale:
            log.info("%s: giving back %d message(s) that waited too long", self._where, len(stale))
            self._release(stale)
        return [r for r in taken if r.fetched_at >= limit]

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def stop(self) -> list[str]:
        """End the thread (after its call in progress); the buffered messages' handles."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            left = [r.receipt_handle for r in self._buffer]
            self._buffer.clear()
        return left

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    # --- the reader thread ------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._next_demand():
                self._round()
        finally:
            self._done()

    def _next_demand(self) -> bool:
        """Wait until a receive wants messages that the buffer does not have."""
        with self._cond:
            while not self._stopped and (self._want == 0 or self._buffer):
                self._cond.wait()
            return not self._stopped

    def _round(self) -> None:
        collected, wait = 0, self._long_poll
        while True:
            with self._cond:
                want = self._want
            asked = min(max(want - collected, 1), self._batch_limit)
            try:
                request = {**self._request, "MaxNumberOfMessages": asked, "WaitTimeSeconds": wait}
                raw = self._call("ReceiveMessage", request).get("Messages", [])
                received = self._decoded(raw)
            except Exception as error:
                self._failed(error)
                return
            collected += len(received)
            if not self._deliver(received) or len(received) < asked or collected >= want:
                break
            wait = 0
        with self._cond:
            self._rounds += 1
            self._cond.notify_all()
            if not collected and not wait:
                self._cond.wait(_SHORT_POLL_PAUSE)

    def _decoded(self, raw: list[dict[str, Any]]) -> list[Received]:
        now = time.monotonic()
        url, source = self._queue.url, self._source_metadata
        return [Received(decode(item, url, source), item["ReceiptHandle"], now) for item in raw]

    def _deliver(self, received: list[Received]) -> bool:
        """Buffer `received`; False (and give them back) once the reader was stopped."""
        with self._cond:
            if not self._stopped:
                self._buffer.extend(received)
                self._cond.notify_all()
                return self._want > 0
        if received:
            self._release([r.receipt_handle for r in received])
        return False

    def _failed(self, error: Exception) -> None:
        try:
            raise_translated(error, self._where)
        except Exception as translated:
            error = translated
        with self._cond:
            if self._stopped:
                return
            self._error = error
            self._rounds += 1
            self._cond.notify_all()
            self._cond.wait(_ERROR_PAUSE)
