"""The asyncio twin: the same behaviour, without blocking the caller's event loop."""

from __future__ import annotations

import asyncio
import threading

from mq_bridge import AsyncConsumer, AsyncPublisher, AsyncRoute, Message
from mq_bridge import Consumer as SyncConsumer
from mq_bridge import Publisher as SyncPublisher
from tests.mq_bridge.helpers import unique


def test_async_publisher_route_and_consumer_work_together():
    source, sink = unique("in"), unique("out")

    async def handler(message: Message) -> dict:
        await asyncio.sleep(0)
        return {"n": message.json()["n"] + 1}

    async def main() -> list[int]:
        route = AsyncRoute.from_config(
            {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
        ).with_handler(handler)
        async with route, AsyncPublisher.from_config({"memory": {"topic": source}}) as publisher:
            for n in range(3):
                await publisher.send_json({"n": n})
            await publisher.send_batch([Message(b'{"n": 10}')])
            async with AsyncConsumer.from_config({"memory": {"topic": sink}}) as consumer:
                got: list[Message] = []
                while len(got) < 4:
                    got += await consumer.poll(max=10, timeout_ms=1000)
                await consumer.commit()
                assert (await consumer.status())["pending"] == 0 and not consumer.exhausted
        return [m.json()["n"] for m in got]

    assert asyncio.run(main()) == [1, 2, 3, 11]


def test_async_request_reply_and_tokens():
    topic = unique("rpc")

    async def main() -> None:
        route = AsyncRoute.from_config(
            {"input": {"memory": {"topic": topic}}, "output": {"response": {}}}
        ).add_handler("ask", lambda data: {"answer": data["q"] * 2})
        async with route:
            publisher = AsyncPublisher.from_config(
                {"memory": {"topic": topic, "request_reply": True}}
            )
            reply = await publisher.request_json({"q": 21}, {"kind": "ask"})
            assert reply.json() == {"answer": 42}
            await publisher.aclose()
        other = unique("tokens")
        await AsyncPublisher.from_config({"memory": {"topic": other}}).send(b"x")
        consumer = AsyncConsumer.from_config({"memory": {"topic": other}})
        messages, token = await consumer.poll_batch(max=5, timeout_ms=500)
        await consumer.nack(token)
        messages, token = await consumer.poll_batch(max=5, timeout_ms=500)
        await consumer.ack(token)
        assert [m.payload for m in messages] == [b"x"]
        await consumer.aclose()

    asyncio.run(main())


def test_a_send_that_must_wait_runs_off_the_loop_and_the_loop_keeps_going():
    topic = unique("full")

    async def main() -> tuple[int, list[bytes]]:
        config = {"memory": {"topic": topic, "capacity": 1, "send_timeout_ms": 5000}}
        publisher = AsyncPublisher.from_config(config)
        await publisher.send(b"first")  # room: taken on the loop at once
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        ticker = asyncio.create_task(tick())
        consumer = AsyncConsumer.from_config({"memory": {"topic": topic}})
        sending = asyncio.create_task(publisher.send(b"second"))  # full: waits in a thread
        await asyncio.sleep(0.1)
        assert not sending.done()
        got = await consumer.poll(max=1, timeout_ms=1000)  # makes room
        await sending
        got += await consumer.poll(max=1, timeout_ms=1000)
        await consumer.commit()
        ticker.cancel()
        await consumer.aclose()
        await publisher.aclose()
        return ticks, [m.payload for m in got]

    ticks, payloads = asyncio.run(main())
    assert payloads == [b"first", b"second"]
    assert ticks >= 3  # the loop kept running while the send waited


def test_async_send_and_request_refuse_metadata_beside_a_message():
    """As the sync Publisher (and both peers): a Message carries its own metadata."""

    async def main() -> None:
        async with AsyncPublisher.from_config({"memory": {"topic": unique("meta")}}) as publisher:
            for call in (publisher.send, publisher.request):
                try:
                    await call(Message(b"m"), {"x": "1"})
                except TypeError as error:
                    assert "metadata must be None when message is a Message" in str(error)
                else:
                    raise AssertionError(f"{call.__name__} took metadata beside a Message")

    asyncio.run(main())


def test_async_consumer_status_is_asked_off_the_event_loop():
    """`status()` may ask the broker (a queue's depth, a group's lag): never on the loop."""

    class Recording:
        asked_on: list[int] = []

        def status(self) -> dict:
            self.asked_on.append(threading.get_ident())
            return {"healthy": True, "pending": 0}

    async def main() -> tuple[dict, int]:
        consumer = AsyncConsumer(Recording())  # type: ignore[arg-type]
        return await consumer.status(), threading.get_ident()

    status, loop_thread = asyncio.run(main())
    assert status == {"healthy": True, "pending": 0}
    assert Recording.asked_on and Recording.asked_on[0] != loop_thread


def test_async_route_has_a_name_a_running_flag_and_a_join_timeout():
    config = {"input": {"memory": {"topic": unique("named")}}, "output": {"null": {}}}

    async def main() -> None:
        route = AsyncRoute.from_config({"routes": {"orders": config}}, "orders")
        assert route.name == "orders" and not route.running
        async with route:
            assert route.running
            await route.join(timeout=0.01)  # returns with the route still running
            assert route.running
        assert not route.running

    asyncio.run(main())


def test_async_publisher_sends_on_the_loop_through_the_public_try_send():
    class Publisher:
        def __init__(self, room: bool) -> None:
            self.room, self.calls = room, []

        def try_send(self, message, metadata=None) -> bool:
            self.calls.append(("try_send", threading.get_ident()))
            return self.room

        def send(self, message, metadata=None) -> None:
            self.calls.append(("send", threading.get_ident()))

    async def main() -> tuple[Publisher, Publisher, int]:
        with_room, full = Publisher(room=True), Publisher(room=False)
        await AsyncPublisher(with_room).send(b"a")  # type: ignore[arg-type]
        await AsyncPublisher(full).send_json({"n": 1})  # type: ignore[arg-type]
        return with_room, full, threading.get_ident()

    with_room, full, loop = asyncio.run(main())
    assert with_room.calls == [("try_send", loop)]
    assert [name for name, _ in full.calls] == ["try_send", "send"]
    assert full.calls[1][1] != loop  # the send that may wait ran in a thread


def test_publisher_try_send_sends_only_what_needs_no_wait():
    topic = unique("try")
    publisher = SyncPublisher.from_config({"memory": {"topic": topic, "capacity": 1}})
    consumer = SyncConsumer.from_config({"memory": {"topic": topic}})
    try:
        assert publisher.try_send(b"1", {"k": "v"}) is True
        assert publisher.try_send(Message(b"2")) is False  # full: nothing sent
        got = consumer.poll(max=5, timeout_ms=1000)
        assert [(m.payload, dict(m.metadata)) for m in got] == [(b"1", {"k": "v"})]
    finally:
        consumer.close()
        publisher.close()
