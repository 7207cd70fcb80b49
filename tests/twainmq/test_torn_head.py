"""Readers take no lock, so they read a partition head that a writer may be updating.

A writer stores the head's fields (segment base, committed end, next offset, ...) one 8-byte
word at a time into the shared mapping, and another process can read the head between any
two of those stores, for as long as the writer is descheduled there (on a loaded machine,
milliseconds). These tests make that interleaving happen deterministically, in one thread:
the head's ``struct.Struct`` objects in ``partition.py`` are replaced by ones that store
word by word and run a reader step after each store (or, for the reader's own loads, run
writes between them). Whatever they see, readers must hand out every record once, under its
own offset.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeGuard

import pytest

from twainmq import Twain
from twainmq import partition as partition_module

_WORD = struct.Struct("<q")
_RECORD_BYTES = 18 + 2 + 5  # header, u16 key, _text(n)


def _text(number: int) -> str:
    return f"m{number:04d}"


class _WordByWord:
    """A ``struct.Struct`` of 8-byte integers whose stores and loads are one word at a time,
    with a hook after each store (``after_store``) and between loads (``between_loads``)."""

    def __init__(
        self,
        real: struct.Struct,
        after_store: Callable[[], None],
        between_loads: Callable[[Any, int], None],
    ) -> None:
        self.real = real
        self.format = real.format
        self.size = real.size
        self._count = real.size // 8
        self._after_store = after_store
        self._between_loads = between_loads

    def pack_into(self, buffer: Any, offset: int, *values: int) -> None:
        for number, value in enumerate(values):
            _WORD.pack_into(buffer, offset + 8 * number, value)
            self._after_store()

    def unpack_from(self, buffer: Any, offset: int = 0) -> tuple[int, ...]:
        words = []
        for number in range(self._count):
            if number:
                self._between_loads(buffer, number)
            words.append(_WORD.unpack_from(buffer, offset + 8 * number)[0])
        return tuple(words)


def _is_head_struct(value: object) -> TypeGuard[struct.Struct]:
    return isinstance(value, struct.Struct) and set(value.format.lstrip("<")) == {"q"}


def _slow_head_words(
    monkeypatch: pytest.MonkeyPatch,
    after_store: Callable[[], None] = lambda: None,
    between_loads: Callable[[Any, int], None] = lambda buffer, loaded: None,
) -> None:
    """Make every head word store and load of ``partition.py`` separate, with hooks."""
    for name, value in list(vars(partition_module).items()):
        if _is_head_struct(value):
            slow = _WordByWord(value, after_store, between_loads)
            monkeypatch.setattr(partition_module, name, slow)
        owner = getattr(value, "__self__", None)
        method = getattr(value, "__name__", "")
        if _is_head_struct(owner) and method in ("pack_into", "unpack_from"):
            slow = _WordByWord(owner, after_store, between_loads)
            monkeypatch.setattr(partition_module, name, getattr(slow, method))


def _write(producer: Any, start: int, count: int) -> int:
    """Write messages ``start .. start + count - 1``: single writes and small batches."""
    number = start
    while number < start + count:
        if number % 7 == 0:
            batch = [(n % 100, _text(n)) for n in range(number, min(number + 3, start + count))]
            producer.write_messages(batch)
            number += len(batch)
        else:
            producer.write_message(number % 100, _text(number))
            number += 1
    return number


def _write_one(producer: Any, number: int) -> int:
    producer.write_message(number % 100, _text(number))
    return number + 1


def _drain(consumer: Any, got: list[tuple[int, str]]) -> None:
    # poll(), not poll_many(): poll_many() keeps an error for the next call, and by then the
    # head it misread may be gone.
    got.extend((m.offset, m.message) for m in consumer)


def test_a_reader_between_any_two_head_stores_of_a_writer_reads_every_record_once(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1 KiB segments: about 40 records each, so the writes below roll about 10 times.
    tmq.create_topic("t", segment_bytes=1024, index_interval_bytes=64)
    with tmq.producer("t") as producer, tmq.consumer("t") as consumer:
        got: list[tuple[int, str]] = []
        # The reader polls after every word the writer stores: at every state of the head a
        # descheduled writer can leave visible (mid-roll, mid-append).
        _slow_head_words(monkeypatch, after_store=lambda: _drain(consumer, got))
        written = _write(producer, 0, 400)
        monkeypatch.undo()
        _drain(consumer, got)
    assert got == [(n, _text(n)) for n in range(written)]


def test_a_reader_seeking_to_the_end_between_any_two_head_stores_lands_on_the_end(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmq.create_topic("t", segment_bytes=1024, index_interval_bytes=64)
    with tmq.producer("t") as producer, tmq.consumer("t") as follower:
        stores = 0
        seek_at = -1

        def seek_to_the_end_at_one_store() -> None:
            # As start_from="now" does: the end offset, then where it is (an append stores
            # the new committed end before the new next offset).
            nonlocal stores
            if stores == seek_at:
                follower.seek(0, follower.end_offsets()[0])
            stores += 1

        _slow_head_words(monkeypatch, after_store=seek_to_the_end_at_one_store)
        written = 0
        for attempt in range(150):
            stores, seek_at = 0, attempt % 6  # after the first, second, ... store of a write
            written = _write(producer, written, 1)
            seek_at = -1
            written = _write(producer, written, 1)
            seen: list[tuple[int, str]] = []
            _drain(follower, seen)
            assert all(message == _text(offset) for offset, message in seen), seen
            assert seen[-1][0] == written - 1
        monkeypatch.undo()
        follower.seek(0, 0)
        everything: list[tuple[int, str]] = []
        _drain(follower, everything)
    assert everything == [(n, _text(n)) for n in range(written)]


def test_a_reader_descheduled_between_its_head_loads_reads_every_record_once(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmq.create_topic("t", segment_bytes=1024, index_interval_bytes=64)
    with tmq.producer("t") as producer, tmq.consumer("t") as consumer:
        reader_head = consumer._readers[0].log._head
        writer_log = producer._topic.log(0)
        got: list[tuple[int, str]] = []
        written = 0
        writing = False

        def roll_and_write_past_the_old_end(buffer: Any, loaded: int) -> None:
            # The reader was descheduled after loading the segment base. Meanwhile a writer
            # (here, in the same thread) appends one record; or, once a batch of 3 no longer
            # fits, writes one (rolling the segment) and writes the next segment past the
            # end of the one the reader is at.
            nonlocal written, writing
            if buffer is not reader_head or loaded != 1 or writing or written >= 400:
                return
            writing = True
            try:
                base, end, _ = writer_log.head()
                # A batch still fits (no roll), or the segment is as full as they get (the
                # next one cannot pass its end): one record, and the reader catches up.
                if end + 3 * _RECORD_BYTES <= 1024 or end + _RECORD_BYTES > 1000:
                    written = _write_one(producer, written)
                    return
                producer.write_messages([(n % 100, _text(n)) for n in range(written, written + 3)])
                written += 3
                assert writer_log.head()[0] != base
                while writer_log.head()[1] <= end:
                    written = _write_one(producer, written)
            finally:
                writing = False

        _slow_head_words(monkeypatch, between_loads=roll_and_write_past_the_old_end)
        for _ in range(2000):
            _drain(consumer, got)
            if written >= 400 and len(got) >= written:
                break
        monkeypatch.undo()
        _drain(consumer, got)
    assert written >= 400
    assert got == [(n, _text(n)) for n in range(written)]
