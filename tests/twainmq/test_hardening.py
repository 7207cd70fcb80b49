"""Bad API calls raise our errors before writing anything; unclosed objects release files."""

from __future__ import annotations

import gc
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from twainmq import (
    InvalidKeyError,
    InvalidMessageError,
    InvalidOptionError,
    MessageTypeError,
    TopicConfigError,
    Twain,
    TwainMQError,
)


@dataclass
class Blob:
    data: Any


@dataclass
class Node:
    name: str
    children: list[Any] = field(default_factory=list)


def _cyclic() -> Node:
    node = Node("a")
    node.children.append(node)
    return node


def _store(tmq: Twain) -> Twain:
    tmq.register_msg_cls(Blob)
    tmq.register_msg_cls(Node)
    tmq.create_topic("nums", key_type="u16", partitions=4)
    tmq.create_topic("text", key_type="char8", partitions=2)
    return tmq


def _write(topic: str, key: Any, message: Any) -> Callable[[Twain], Any]:
    def call(tmq: Twain) -> Any:
        with tmq.producer(topic) as producer:
            return producer.write_message(key, message)

    return call


def _write_many(topic: str, items: Any) -> Callable[[Twain], Any]:
    def call(tmq: Twain) -> Any:
        with tmq.producer(topic) as producer:
            return producer.write_messages(items)

    return call


def _consume(action: Callable[[Any], Any]) -> Callable[[Twain], Any]:
    def call(tmq: Twain) -> Any:
        with tmq.consumer("nums") as consumer:
            return action(consumer)

    return call


def _group(action: Callable[[Any], Any]) -> Callable[[Twain], Any]:
    def call(tmq: Twain) -> Any:
        with tmq.consumer("nums", group="g") as consumer:
            return action(consumer)

    return call


def _create(**kwargs: Any) -> Callable[[Twain], Any]:
    return lambda tmq: tmq.create_topic("new", **kwargs)


BAD_CALLS: list[tuple[str, Callable[[Twain], Any], type[Exception]]] = [
    ("charN key with a lone surrogate", _write("text", "\ud800", "m"), InvalidKeyError),
    ("text message with a lone surrogate", _write("nums", 1, "\ud800"), InvalidMessageError),
    (
        "text message with a lone surrogate (char key)",
        _write("text", "k", "x\udfff"),
        InvalidMessageError,
    ),
    ("dataclass with a bytes field", _write("nums", 1, Blob(b"raw")), MessageTypeError),
    ("dataclass with a set field", _write("nums", 1, Blob({1, 2})), MessageTypeError),
    (
        "dataclass with a surrogate str field",
        _write("nums", 1, Blob("\ud800")),
        InvalidMessageError,
    ),
    ("cyclic dataclass", _write("nums", 1, _cyclic()), InvalidMessageError),
    ("batch item not a pair (3 values)", _write_many("nums", [(1, "a", "b")]), MessageTypeError),
    ("batch item not a pair (list of ints)", _write_many("nums", [1, 2, 3]), MessageTypeError),
    ("batch item of one value", _write_many("nums", [(1,)]), MessageTypeError),
    ("bad pair after good ones", _write_many("nums", [(1, "a"), (2, "b"), (1,)]), MessageTypeError),
    ("batch surrogate text", _write_many("nums", [(1, "ok"), (2, "\ud800")]), InvalidMessageError),
    ("batch surrogate key", _write_many("text", [("a", "ok"), ("\udc80", "x")]), InvalidKeyError),
    ("batch cyclic dataclass", _write_many("nums", [(1, _cyclic())]), InvalidMessageError),
    ("batch dataclass with bytes", _write_many("nums", [(1, Blob(b"x"))]), MessageTypeError),
    ("poll timeout as str", _consume(lambda c: c.poll(timeout="1")), InvalidOptionError),
    ("poll timeout NaN", _consume(lambda c: c.poll(timeout=math.nan)), InvalidOptionError),
    ("poll timeout negative", _consume(lambda c: c.poll(timeout=-1)), InvalidOptionError),
    ("poll_many n as str", _consume(lambda c: c.poll_many(n="3")), InvalidOptionError),
    ("poll_many timeout as str", _consume(lambda c: c.poll_many(timeout="1")), InvalidOptionError),
    (
        "seek_to_timestamp NaN",
        _consume(lambda c: c.seek_to_timestamp(math.nan)),
        InvalidOptionError,
    ),
    (
        "seek_to_timestamp inf",
        _consume(lambda c: c.seek_to_timestamp(math.inf)),
        InvalidOptionError,
    ),
    (
        "seek_to_timestamp str",
        _consume(lambda c: c.seek_to_timestamp("yesterday")),
        InvalidOptionError,
    ),
    ("seek_to_timestamp None", _consume(lambda c: c.seek_to_timestamp(None)), InvalidOptionError),
    (
        "offsets_for_timestamp NaN",
        _consume(lambda c: c.offsets_for_timestamp(math.nan)),
        InvalidOptionError,
    ),
    ("group poll timeout as str", _group(lambda c: c.poll(timeout="1")), InvalidOptionError),
    ("group poll_many n as str", _group(lambda c: c.poll_many(n="3")), InvalidOptionError),
    ("message_types of an int", _create(message_types=[1]), TopicConfigError),
    ("message_types of None", _create(message_types=[None]), TopicConfigError),
    ("message_types as one str", _create(message_types="Blob"), TopicConfigError),
]


@pytest.mark.parametrize(
    ("call", "error"), [(c, e) for _, c, e in BAD_CALLS], ids=[n for n, _, _ in BAD_CALLS]
)
def test_bad_call_raises_our_error_and_writes_nothing(
    tmq: Twain, call: Callable[[Twain], Any], error: type[Exception]
) -> None:
    store = _store(tmq)
    with pytest.raises(error) as caught:
        call(store)
    assert isinstance(caught.value, TwainMQError)
    assert not isinstance(caught.value, UnicodeError)
    assert store.end_offsets("nums") == {0: 0, 1: 0, 2: 0, 3: 0}
    assert store.end_offsets("text") == {0: 0, 1: 0}
    assert sorted(store.list_topics()) == ["nums", "text"]


def test_errors_name_the_bad_value(tmq: Twain) -> None:
    store = _store(tmq)
    with store.producer("text") as producer:
        with pytest.raises(InvalidKeyError, match=r"\\ud800"):
            producer.write_message("\ud800", "m")
        with pytest.raises(InvalidMessageError, match=r"\\udfff"):
            producer.write_message("k", "\udfff")
        with pytest.raises(MessageTypeError, match=r"\[1, 2, 3\]"):
            producer.write_messages([[1, 2, 3]])  # type: ignore[list-item]
        with pytest.raises(MessageTypeError, match="bytes"):
            producer.write_message("k", Blob(b"raw"))
    with store.consumer("nums") as consumer:
        with pytest.raises(InvalidOptionError, match="'1'"):
            consumer.poll(timeout="1")
        with pytest.raises(InvalidOptionError, match="nan"):
            consumer.seek_to_timestamp(math.nan)
    with pytest.raises(TopicConfigError, match="entry 1 "):
        store.create_topic("new", message_types=[1])  # type: ignore[list-item]


def test_valid_calls_still_work(tmq: Twain) -> None:
    store = _store(tmq)
    with store.producer("text") as producer:
        producer.write_message("ключ", "текст ✓")
        producer.write_messages([("a", Node("x", [Node("y")])), ("b", b"raw")])
    with store.consumer("text") as consumer:
        assert consumer.poll(timeout=0.5) is not None
        assert consumer.poll(timeout=1) is not None
        assert len(consumer.poll_many(5, timeout=0)) == 1
        consumer.seek_to_timestamp(0)
        assert len(consumer.poll_many(5, timeout=0.1)) == 3


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _drop(make: Callable[[], Any], count: int) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(count):
            make()
        gc.collect()
    return [w for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_unclosed_consumers_and_producers_release_their_files(tmq: Twain) -> None:
    store = _store(tmq)
    with store.producer("nums") as warm:
        for key in range(16):
            warm.write_message(key, "warm")
    gc.collect()
    baseline = _open_fds()

    def consumer() -> None:
        c = store.consumer("nums")
        assert c.poll() is not None  # every partition's files opened

    def producer() -> None:
        p = store.producer("nums")
        for key in range(8):
            p.write_message(key, "m")  # opens every partition, takes their locks lazily

    def batch_producer() -> None:
        p = store.producer("nums", fsync="batch", batch_interval=0.001)
        p.write_messages([(key, "m") for key in range(8)])

    for make in (consumer, producer, batch_producer):
        caught = _drop(make, 200)
        assert _open_fds() == baseline, make.__name__
        assert len(caught) == 200, make.__name__
        assert "unclosed" in str(caught[0].message)

    # The partitions are free again: an exclusive producer can take them all.
    with store.producer("nums", exclusive=True) as exclusive:
        for key in range(8):
            exclusive.write_message(key, "after")


def test_unclosed_group_consumer_releases_partition_files(tmq: Twain) -> None:
    store = _store(tmq)
    gc.collect()
    baseline = _open_fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            group = store.consumer("nums", group=f"g{_}")
            group.poll()
            del group
            gc.collect()
    assert any(issubclass(w.category, ResourceWarning) for w in caught)
    # Partition files are closed; each dropped member may still hold its membership lock.
    assert _open_fds() <= baseline + 5 * 5


def test_closed_objects_do_not_warn(tmq: Twain) -> None:
    store = _store(tmq)

    def closed() -> None:
        with store.producer("nums") as p:
            p.write_message(1, "m")
        with store.consumer("nums") as c:
            c.poll()

    assert _drop(closed, 20) == []


def test_close_after_finalizer_is_harmless(tmq: Twain) -> None:
    store = _store(tmq)
    p = store.producer("nums")
    p.write_message(1, "m")
    p.close()
    p.close()
    assert not p._finalizer.alive
