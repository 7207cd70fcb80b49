"""Payloads: str, bytes and registered dataclasses (nested), never pickle."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from twainmq import (
    MessageTypeConflictError,
    MessageTypeError,
    Twain,
    UnregisteredMessageTypeError,
)
from twainmq.message import UndecodedMessage


@dataclass
class Point:
    x: int
    y: int


@dataclass
class Shape:
    name: str
    points: list[Point]
    centre: Point | None = None
    tags: dict[str, Point] = field(default_factory=dict)
    pair: tuple[Point, ...] = ()


@dataclass
class Renamed:
    __message_type__ = "shapes.Renamed"
    value: float


def round_trip(tmq: Twain, message: object) -> object:
    tmq.create_topic("t", partitions=1)
    tmq.producer("t").write_message(1, message)
    got = tmq.consumer("t").poll()
    assert got is not None
    return got.message


def test_text_and_bytes_come_back_as_sent(tmq: Twain) -> None:
    tmq.create_topic("t")
    producer = tmq.producer("t")
    producer.write_message(1, "héllo ✓")
    producer.write_message(1, b"\x00\xff raw")
    producer.write_message(1, "")
    assert [m.message for m in tmq.consumer("t").poll_many(5)] == ["héllo ✓", b"\x00\xff raw", ""]


def test_nested_dataclasses_are_rebuilt(tmq: Twain) -> None:
    tmq.register_msg_cls(Point)
    tmq.register_msg_cls(Shape)
    shape = Shape(
        "tri", [Point(0, 0), Point(1, 2)], Point(1, 1), {"a": Point(5, 6)}, (Point(7, 8),)
    )
    assert round_trip(tmq, shape) == shape


def test_registration_after_the_topic_and_producer_exist(tmq: Twain) -> None:
    tmq.create_topic("late")
    producer = tmq.producer("late")
    tmq.register_msg_cls(Point)
    producer.write_message(3, Point(1, 2))
    assert tmq.consumer("late").poll().message == Point(1, 2)  # type: ignore[union-attr]


def test_message_type_name_attribute(tmq: Twain) -> None:
    tmq.register_msg_cls(Renamed)
    assert round_trip(tmq, Renamed(2.5)) == Renamed(2.5)


def test_unregistered_dataclass_is_refused_by_name(tmq: Twain) -> None:
    tmq.create_topic("t")
    with pytest.raises(UnregisteredMessageTypeError, match="'Point' is not registered"):
        tmq.producer("t").write_message(1, Point(1, 2))


def test_a_reader_without_the_class_gets_an_undecoded_message(tmq: Twain, tmp_path) -> None:  # type: ignore[no-untyped-def]
    tmq.register_msg_cls(Point)
    tmq.create_topic("t")
    tmq.producer("t").write_message(1, Point(1, 2))
    other = Twain(tmq.root_dir)
    got = other.consumer("t").poll()
    assert got is not None
    assert got.message == UndecodedMessage("Point", '{"x":1,"y":2}', got.message.reason)
    assert "not registered" in got.message.reason


def test_topic_message_types_limit_what_is_accepted(tmq: Twain) -> None:
    tmq.register_msg_cls(Point)
    tmq.register_msg_cls(Renamed)
    tmq.create_topic("t", message_types=[Point])
    producer = tmq.producer("t")
    producer.write_message(1, Point(0, 0))
    with pytest.raises(UnregisteredMessageTypeError, match=r"shapes\.Renamed"):
        producer.write_message(1, Renamed(1.0))


def test_registry_refuses_non_dataclasses_and_name_clashes(tmq: Twain) -> None:
    with pytest.raises(MessageTypeError, match="not a dataclass"):
        tmq.register_msg_cls(int)
    tmq.register_msg_cls(Point)
    tmq.register_msg_cls(Point)  # the same class again is fine

    @dataclass
    class Point2:
        __message_type__ = "Point"

    with pytest.raises(MessageTypeConflictError, match="'Point' is already registered"):
        tmq.register_msg_cls(Point2)


@pytest.mark.parametrize("bad", [12, 1.5, None, ["a"], {"a": 1}, object()])
def test_other_payload_types_are_refused(tmq: Twain, bad: object) -> None:
    tmq.create_topic("t")
    with pytest.raises(MessageTypeError, match=type(bad).__name__):
        tmq.producer("t").write_message(1, bad)
