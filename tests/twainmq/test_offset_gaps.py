"""Offsets are never reused, and a gap in a partition's offsets is never skipped in silence.

Files are damaged by hand, as a disk, a backup tool or an operator does: the active segment
deleted (its records are lost, but the next write must not take their offsets again), a sealed
segment deleted or cut at a record boundary (a reader must raise TopicCorruptError naming the
file, the partition and the offsets, not stop or skip).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from twainmq import TopicCorruptError, Twain
from twainmq.cli import main

# 66-byte records (18 header + 2 key + 46 payload): 15 per 1 KiB segment, and with a 64-byte
# index interval every record has an index entry.
RECORD = 66
PER_SEGMENT = 1024 // RECORD
WRITTEN = 300


def _text(number: int) -> str:
    return f"m{number:05d}" + "x" * 40


def _partition(tmq: Twain) -> Path:
    return tmq.root_dir / "t" / "0"


def _bases(tmq: Twain) -> list[int]:
    return sorted(int(p.name[:-4]) for p in _partition(tmq).glob("*.log"))


def _log(tmq: Twain, base: int) -> Path:
    return _partition(tmq) / f"{base:020d}.log"


def _write(tmq: Twain) -> list[int]:
    """Create topic ``t`` and write ``WRITTEN`` records in 1 KiB segments; return the bases."""
    tmq.create_topic("t", segment_bytes=1024, index_interval_bytes=64)
    with tmq.producer("t") as producer:
        for number in range(WRITTEN):
            assert producer.write_message(1, _text(number)).offset == number
    bases = _bases(tmq)
    assert bases == [PER_SEGMENT * i for i in range(len(bases))]
    assert len(bases) > 10
    return bases


def _read_until_error(tmq: Twain, **seek: int) -> tuple[list[tuple[int, str]], TopicCorruptError]:
    """Read partition 0 (from ``seek["offset"]`` if given) until it raises; return what was
    read and the error. A consumer that stops without an error fails the test."""
    got: list[tuple[int, str]] = []
    with tmq.consumer("t") as consumer:
        if seek:
            consumer.seek(0, seek["offset"])
        with pytest.raises(TopicCorruptError) as info:
            for _ in range(10 * WRITTEN):
                message = consumer.poll()
                assert message is not None, f"stopped silently after {got[-1:]}"
                got.append((message.offset, message.message))
        # Still there on the next poll: the reader does not move past the gap.
        with pytest.raises(TopicCorruptError):
            consumer.poll()
    return got, info.value


def _expected(offsets: range) -> list[tuple[int, str]]:
    return [(n, _text(n)) for n in offsets]


def test_an_undamaged_topic_with_many_rolls_reads_every_record_once(tmq: Twain) -> None:
    bases = _write(tmq)
    with tmq.consumer("t") as consumer:
        assert [(m.offset, m.message) for m in consumer] == _expected(range(WRITTEN))
        assert consumer.poll() is None
        for base in bases:  # from each segment's first record, and from inside one
            for start in (base, base + 7):
                consumer.seek(0, start)
                assert [m.offset for m in consumer] == list(range(start, WRITTEN))
    with tmq.consumer("t", fetch_bytes=1024) as small_chunks:
        got: list[tuple[int, str]] = []
        while batch := small_chunks.poll_many(7):
            got.extend((m.offset, m.message) for m in batch)
        assert got == _expected(range(WRITTEN))


def test_deleting_the_active_segment_does_not_reuse_its_offsets(tmq: Twain) -> None:
    bases = _write(tmq)
    active = bases[-1]
    _log(tmq, active).unlink()
    with tmq.producer("t") as producer:
        assert producer.write_message(1, "after").offset == WRITTEN
    assert tmq.end_offsets("t") == {0: WRITTEN + 1}
    got, error = _read_until_error(tmq)
    assert got == _expected(range(active))
    assert error.partition == 0
    assert error.offsets == range(active, WRITTEN)
    assert error.path == str(_log(tmq, active))
    assert f"{active:020d}.log" in str(error)
    assert f"partition 0, offsets {active}..{WRITTEN - 1}" in str(error)
    # Past the gap, the new record is there under its own offset.
    with tmq.consumer("t") as consumer:
        consumer.seek(0, WRITTEN)
        assert [(m.offset, m.message) for m in consumer] == [(WRITTEN, "after")]


def test_deleting_the_active_segment_and_the_head_does_not_reuse_indexed_offsets(
    tmq: Twain,
) -> None:
    # With no head, the active segment's index (every record is indexed here) still says
    # which offsets were written.
    bases = _write(tmq)
    active = bases[-1]
    _log(tmq, active).unlink()
    (_partition(tmq) / "head").unlink()
    with tmq.producer("t") as producer:
        assert producer.write_message(1, "after").offset == WRITTEN
    _, error = _read_until_error(tmq)
    assert error.offsets == range(active, WRITTEN)


def test_deleting_the_only_segment_does_not_reuse_its_offsets(tmq: Twain) -> None:
    tmq.create_topic("t")
    with tmq.producer("t") as producer:
        for number in range(10):
            producer.write_message(1, _text(number))
    _log(tmq, 0).unlink()
    with tmq.producer("t") as producer:
        assert producer.write_message(1, "after").offset == 10
    assert tmq.end_offsets("t") == {0: 11}


def test_deleting_an_empty_active_segment_loses_nothing(tmq: Twain) -> None:
    tmq.create_topic("t")
    tmq.consumer("t").close()  # opens the partition: an empty segment 0
    assert _log(tmq, 0).stat().st_size == 0
    _log(tmq, 0).unlink()
    with tmq.producer("t") as producer:
        assert [producer.write_message(1, _text(n)).offset for n in range(3)] == [0, 1, 2]
    with tmq.consumer("t") as consumer:
        assert [(m.offset, m.message) for m in consumer] == _expected(range(3))


@pytest.mark.parametrize("also_the_index", [False, True])
@pytest.mark.parametrize("which", [1, 5, -2])  # the second, a middle one, the last sealed
def test_a_deleted_sealed_segment_is_reported_not_skipped(
    tmq: Twain, which: int, also_the_index: bool
) -> None:
    bases = _write(tmq)
    gone, following = bases[which], bases[which + 1]
    _log(tmq, gone).unlink()
    if also_the_index:
        (_partition(tmq) / f"{gone:020d}.idx").unlink()
    got, error = _read_until_error(tmq)
    assert got == _expected(range(gone))
    assert (error.partition, error.offsets) == (0, range(gone, following))
    assert error.path == str(_log(tmq, gone))
    assert f"{gone:020d}.log is missing" in str(error)
    assert f"partition 0, offsets {gone}..{following - 1}" in str(error)
    # A reader that starts past the gap reads the rest; one that starts in it raises.
    with tmq.consumer("t") as consumer:
        consumer.seek(0, following)
        assert [m.offset for m in consumer] == list(range(following, WRITTEN))
    got, error = _read_until_error(tmq, offset=gone + 3)
    assert (got, error.offsets) == ([], range(gone + 3, following))
    # Writing goes on where it was: the head is intact.
    with tmq.producer("t") as producer:
        assert producer.write_message(1, "after").offset == WRITTEN


@pytest.mark.parametrize("kept", [0, 1, 7, PER_SEGMENT - 1])
def test_a_sealed_segment_cut_at_a_record_boundary_is_reported(tmq: Twain, kept: int) -> None:
    bases = _write(tmq)
    cut, following = bases[4], bases[5]
    os.truncate(_log(tmq, cut), kept * RECORD)
    got, error = _read_until_error(tmq)
    assert got == _expected(range(cut + kept))
    assert (error.partition, error.offsets) == (0, range(cut + kept, following))
    assert error.path == str(_log(tmq, cut))
    assert f"{cut:020d}.log was cut short" in str(error)
    assert f"partition 0, offsets {cut + kept}..{following - 1}" in str(error)


def test_poll_many_returns_what_precedes_a_gap_then_raises(tmq: Twain) -> None:
    bases = _write(tmq)
    _log(tmq, bases[3]).unlink()
    with tmq.consumer("t") as consumer:
        got: list[int] = []
        with pytest.raises(TopicCorruptError, match=f"{bases[3]:020d}.log"):
            while batch := consumer.poll_many(50):
                got.extend(m.offset for m in batch)
    assert got == list(range(bases[3]))


def test_a_gap_in_one_partition_does_not_hide_the_others(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2, segment_bytes=1024, index_interval_bytes=64)
    with tmq.producer("t", partitioner=lambda key, partitions: key) as producer:
        for number in range(200):
            producer.write_message(number % 2, _text(number))
    _log(tmq, 2 * PER_SEGMENT).unlink()  # partition 0
    with tmq.consumer("t") as consumer:
        got: dict[int, list[int]] = {0: [], 1: []}
        with pytest.raises(TopicCorruptError, match="partition 0, "):
            for _ in range(1000):
                message = consumer.poll()
                assert message is not None
                got[message.partition].append(message.offset)
    assert got[0] == list(range(2 * PER_SEGMENT))


def test_retention_still_moves_a_reader_up_without_an_error(tmq: Twain) -> None:
    # Retention deletes the oldest segments on purpose, also under a slow reader: not a gap.
    tmq.create_topic("t", segment_bytes=1024, index_interval_bytes=64, retention_bytes=4096)
    with tmq.producer("t") as producer, tmq.consumer("t", fetch_bytes=1024) as consumer:
        for number in range(100):
            producer.write_message(1, _text(number))
        first = consumer.poll()
        assert first is not None
        reading = first.offset // PER_SEGMENT * PER_SEGMENT
        for number in range(100, WRITTEN):
            producer.write_message(1, _text(number))
        kept = _bases(tmq)
        assert kept[0] > reading + PER_SEGMENT  # its segment and the next are gone
        rest = [(m.offset, m.message) for m in consumer]
    # The segment it had open, to its end, then the oldest segment kept.
    assert rest == _expected(range(first.offset + 1, reading + PER_SEGMENT)) + _expected(
        range(kept[0], WRITTEN)
    )


def test_the_command_line_consumer_fails_on_a_gap(
    tmq: Twain, capsys: pytest.CaptureFixture[str]
) -> None:
    bases = _write(tmq)
    _log(tmq, bases[2]).unlink()
    code = main(["--root", str(tmq.root_dir), "consume", "t"])
    err = capsys.readouterr().err
    assert code != 0
    assert f"{bases[2]:020d}.log" in err
