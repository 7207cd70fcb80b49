"""The `redis` (pub/sub) endpoint on the real Redis: at most once, payload only."""

from __future__ import annotations

import uuid

import pytest

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.errors import ConfigError

pytestmark = pytest.mark.redis


def channel() -> str:
    return f"test-ch-{uuid.uuid4().hex[:10]}"


def poll_n(consumer: Consumer, count: int) -> list[Message]:
    got: list[Message] = []
    for _ in range(50):
        got += consumer.poll(max=count - len(got), timeout_ms=100)
        if len(got) >= count:
            break
    return got


def test_subscribers_get_what_is_published_after_they_subscribed(redis_url: str) -> None:
    name = channel()
    config = {"redis": {"url": redis_url, "channel": name}}
    with Publisher.from_config(config) as publisher:
        publisher.send(b"nobody listens")  # pub/sub keeps nothing
        with Consumer.from_config(config) as first, Consumer.from_config(config) as second:
            publisher.send_batch([b"a", b"b"])
            publisher.send_json({"c": 1}, {"lost": "metadata"})
            for consumer in (first, second):
                got = poll_n(consumer, 3)
                assert [m.payload for m in got] == [b"a", b"b", b'{"c":1}']
                assert got[2].metadata == {}
                consumer.commit()
            assert first.status()["pending"] is None


def test_pattern_subscription_and_source_metadata(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    prefix = channel()
    reader = {"redis": {"url": redis_url, "channel": f"{prefix}.*", "pattern": True}}
    with Consumer.from_config(reader) as consumer:
        with Publisher.from_config({"redis": {"url": redis_url, "channel": f"{prefix}.x"}}) as p:
            p.send(b"hi")
        (message,) = poll_n(consumer, 1)
    assert message.payload == b"hi"
    assert message.metadata == {
        "mqb.src.redis_channel": f"{prefix}.x",
        "mqb.src.redis_pattern": f"{prefix}.*",
    }


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"redis\.url"):
        Publisher.from_config({"redis": {"url": "tcp://127.0.0.1:6379"}})
    with pytest.raises(ConfigError, match=r"redis\.stream"):
        Publisher.from_config({"redis": {"url": "redis://127.0.0.1", "stream": "s"}})
