"""`ReplyForwarders`, the one reply-forwarding table every input that answers requests uses."""

from __future__ import annotations

import threading

from mq_bridge.endpoints.kit.replies import ReplyForwarders, ReplyRegistry, ReplyWaiter
from mq_bridge.message import Message


class Recorded(ReplyForwarders):
    """Forwards into a list, and counts `prepare` and `release`."""

    def __init__(self, registry: ReplyRegistry) -> None:
        super().__init__(registry)
        self.forwarded: list[tuple[bytes, str, str]] = []
        self.prepared = self.released = 0

    def forward(self, reply: Message, reply_to: str, correlation_id: str) -> None:
        self.forwarded.append((reply.payload, reply_to, correlation_id))

    def prepare(self) -> None:
        self.prepared += 1

    def release(self) -> None:
        self.released += 1


def request(correlation_id: str, reply_to: str = "replies") -> Message:
    return Message(b"question", {"reply_to": reply_to, "correlation_id": correlation_id})


def reply(correlation_id: str) -> Message:
    return Message(b"answer", {"correlation_id": correlation_id})


def test_only_requests_get_a_forwarder_and_a_reply_is_forwarded_to_reply_to() -> None:
    registry = ReplyRegistry()
    forwarders = Recorded(registry)
    plain = Message(b"no request", {"correlation_id": "c0"})  # no reply_to: not a request
    forwarders.expect([plain, request("c1", "queue-a"), Message(b"bare")])
    assert len(forwarders) == 1 and forwarders.prepared == 1
    assert "c1" in registry and "c0" not in registry
    assert registry.deliver(reply("c1"))
    assert forwarders.forwarded == [(b"answer", "queue-a", "c1")]


def test_forget_unregisters_the_settled_batch_only() -> None:
    registry = ReplyRegistry()
    forwarders = Recorded(registry)
    settled, pending = [request("c1"), request("c2")], [request("c3")]
    forwarders.expect(settled + pending)
    forwarders.forget(settled)
    assert len(forwarders) == 1
    assert "c3" in registry and "c1" not in registry and "c2" not in registry
    assert not registry.deliver(reply("c1"))  # a reply after its batch settled goes nowhere
    assert forwarders.forwarded == []


def test_forget_leaves_a_newer_waiter_with_the_same_correlation_id_alone() -> None:
    registry = ReplyRegistry()
    forwarders = Recorded(registry)
    forwarders.expect([request("c1")])
    forwarders.forget([request("c1")])
    newer = registry.expect("c1")  # someone else waits for c1 now
    forwarders.forget([request("c1")])
    assert "c1" in registry
    registry.forget(newer)


def test_a_newer_request_with_the_same_correlation_id_replaces_the_older() -> None:
    registry = ReplyRegistry()
    forwarders = Recorded(registry)
    forwarders.expect([request("c1", "old")])
    forwarders.expect([request("c1", "new")])
    assert len(forwarders) == 1
    registry.deliver(reply("c1"))
    assert forwarders.forwarded == [(b"answer", "new", "c1")]


def test_close_unregisters_every_unanswered_request_then_releases() -> None:
    registry = ReplyRegistry()
    forwarders = Recorded(registry)
    forwarders.expect([request("c1"), request("c2")])
    forwarders.close()
    assert len(forwarders) == 0 and forwarders.released == 1
    assert "c1" not in registry and "c2" not in registry
    forwarders.expect([request("c3")])  # usable again after a reconnect
    assert "c3" in registry
    forwarders.close()
    assert "c3" not in registry and forwarders.released == 2


class PausingRegistry(ReplyRegistry):
    """Holds `register` until told to go, so another thread can act in between."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.go = threading.Event(), threading.Event()

    def register(self, waiter: ReplyWaiter) -> ReplyWaiter:
        self.entered.set()
        self.go.wait()
        return super().register(waiter)


def test_a_close_during_an_expect_never_leaves_a_forwarder_registered() -> None:
    """`expect` on the route's thread, `close` from another: the table's lock covers the
    registry update, so close either sees the forwarder (and forgets it) or comes after."""
    registry = PausingRegistry()
    forwarders = Recorded(registry)
    expecting = threading.Thread(target=forwarders.expect, args=([request("c1")],))
    expecting.start()
    assert registry.entered.wait(10.0)
    closing = threading.Thread(target=forwarders.close)
    closing.start()
    # With the lock, close waits for expect; without it, close would finish here, before the
    # forwarder is registered. This join only gives a lockless close the time to do that.
    closing.join(0.2)
    registry.go.set()
    expecting.join(10.0)
    closing.join(10.0)
    assert not expecting.is_alive() and not closing.is_alive()
    assert "c1" not in registry and len(forwarders) == 0
