"""Corruption fuzzer: damage every kind of file twainmq writes, then read everything back.

Seeded and bounded in time: ``TWAINMQ_FUZZ_SECONDS`` (default 20) and ``TWAINMQ_FUZZ_SEED``.
Each case copies a small template store (two partitions of many 1 KiB segments, a dense index,
one topic with retention so a ``log-start`` file exists, a consumer group with commits),
damages one file (a bit flip, a cut at a record or entry boundary, a cut between two, a
deletion, garbage appended; the group's commit log counts as one file kind) and then:

1. runs the read-only check (``twainmq check``'s ``verify.check_topic``) on the damaged files;
2. reads every partition with a fresh consumer until it has nothing more, and for a group
   file, joins the group and looks at where each partition resumes;
3. classifies the outcome as **read correctly** (every message of every partition, with its
   offset, key and payload, and the next write gets the next offset: nothing reused) or
   **detected** (a twainmq error whose message names the damaged file). Anything else (a
   wrong or missing message without an error, a stop, a foreign exception, an error naming
   another file) is **other**, and fails the test. ``twainmq check`` must agree: damaged
   exactly when the consumer could not read everything. A detected group file must be
   repaired by ``twainmq groups reset`` (``reset_offsets``): the group then resumes there.

The counts per file kind and outcome are printed (``pytest -s`` shows them) and, with
``TWAINMQ_FUZZ_REPORT=path``, written there as JSON.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from twainmq import Twain, TwainMQError
from twainmq.config import read_config
from twainmq.encoding import record_boundaries
from twainmq.groups import GroupFileCorruptError, GroupPaths, reset_offsets
from twainmq.groups.commit_log_format import HEADER_BYTES, RECORD_HEAD_BYTES, decode_record
from twainmq.groups.commits import read_commits
from twainmq.groups.state import load_state
from twainmq.verify import check_topic

FUZZ_SECONDS = float(os.environ.get("TWAINMQ_FUZZ_SECONDS", "20"))
SEED = int(os.environ.get("TWAINMQ_FUZZ_SEED", "20261201"))
PARTITIONS = 2
PER_PARTITION = 160
COMMITTED = {0: 37, 1: 101}
DAMAGES = ("flip", "cut_boundary", "cut_between", "delete", "garbage")
KINDS = (
    "sealed_segment",
    "active_segment",
    "sealed_index",
    "active_index",
    "head",
    "log_start",
    "topic_config",
    "group_state",
    "group_commit_log",
)


def _text(partition: int, number: int) -> str:
    # Lengths vary, so record boundaries are not evenly spaced.
    return f"p{partition}-m{number:04d}-" + "x" * (number * 7 % 41)


@dataclass(frozen=True)
class Template:
    """A store written once; each case damages a copy of it."""

    root: Path
    topic: str
    expected: dict[int, list[tuple[int, int, str]]]  # partition -> (offset, key, message)
    ends: dict[int, int]


def _build(root: Path, topic: str, **settings: int) -> Template:
    tmq = Twain(root)
    tmq.create_topic(topic, partitions=PARTITIONS, segment_bytes=1024, index_interval_bytes=128,
                     **settings)  # fmt: skip
    with tmq.producer(topic, partitioner=lambda key, partitions: key % partitions) as producer:
        for number in range(PER_PARTITION):
            for partition in range(PARTITIONS):
                producer.write_message(partition + 2 * number, _text(partition, number))
    expected: dict[int, list[tuple[int, int, str]]] = {p: [] for p in range(PARTITIONS)}
    with tmq.consumer(topic) as consumer:  # also lets retention settle at open
        for message in consumer:
            expected[message.partition].append((message.offset, message.key, message.message))
    for partition, messages in expected.items():
        offsets = [offset for offset, _, _ in messages]
        assert offsets == list(range(offsets[0], PER_PARTITION)), partition
    with tmq.consumer(topic, group="g") as group:
        group.commit({0: 5})  # earlier records in the commit log, later overwritten
        group.commit({0: 6, 1: 9})
        group.commit(COMMITTED)
    return Template(root, topic, expected, tmq.end_offsets(topic))


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    base = tmp_path_factory.mktemp("fuzz-templates")
    plain = _build(base / "plain", "t")
    kept = _build(base / "kept", "t", retention_bytes=4096)
    assert (kept.root / "t" / "0" / "log-start").exists()
    return {"plain": plain, "kept": kept}


# --- choosing and damaging a file -----------------------------------------------------------


def _segments(partition_dir: Path, suffix: str) -> list[Path]:
    return sorted(partition_dir.glob(f"*{suffix}"))


def _pick_file(root: Path, kind: str, rng: random.Random) -> Path:
    partition_dir = root / "t" / str(rng.randrange(PARTITIONS))
    group = GroupPaths.of(root, "t", "g")
    if kind in ("sealed_segment", "sealed_index"):
        files = _segments(partition_dir, ".log" if kind == "sealed_segment" else ".idx")[:-1]
        return rng.choice(files)
    if kind in ("active_segment", "active_index"):
        return _segments(partition_dir, ".log" if kind == "active_segment" else ".idx")[-1]
    if kind == "head":
        return partition_dir / "head"
    if kind == "log_start":
        return partition_dir / "log-start"
    if kind == "topic_config":
        return root / "t.twc"
    if kind == "group_state":
        return group.state
    return group.commit_log


def _number_bytes(data: bytes) -> list[int]:
    """Positions of the digits of JSON numbers (not inside strings)."""
    found, quoted = [], False
    for position, char in enumerate(data):
        if char == 0x22:
            quoted = not quoted
        elif not quoted and 0x30 <= char <= 0x39:
            found.append(position)
    return found


def _boundaries(path: Path, data: bytes) -> list[int]:
    """Positions where a cut leaves whole units: records of a segment, entries of an index."""
    if path.name == "commits.log":
        return _commit_log_boundaries(data)
    if path.suffix == ".log":
        starts = [position for position, _ in record_boundaries(data, 0, len(data))]
        return [*starts, len(data)]
    if path.suffix == ".idx":
        return list(range(8, len(data) + 1, 20))
    return list(range(len(data) + 1))


def _commit_log_boundaries(data: bytes) -> list[int]:
    """The header's end, then the end of each record."""
    found, position = [HEADER_BYTES], HEADER_BYTES
    while (decoded := decode_record(data, position)) is not None:
        position = decoded[1]
        found.append(position)
    return found


def _damage(path: Path, damage: str, rng: random.Random) -> str:
    """Damage ``path``; return a description for failure messages."""
    data = path.read_bytes()
    if damage == "delete" or (not data and damage != "garbage"):
        path.unlink()
        return "deleted"
    if damage == "flip":
        byte, bit = rng.randrange(len(data)), rng.randrange(8)
        if path.name == "head":
            byte = rng.randrange(56)  # the head's fields and checks; the rest is unused
        numbers = _number_bytes(data)
        if path.suffix in (".json", ".twc") and numbers and rng.random() < 0.5:
            byte, bit = rng.choice(numbers), rng.randrange(3)  # a changed number, still JSON
        if path.name == "commits.log" and rng.random() < 0.5:
            # A committed offset off by a little: still a plausible number.
            entries = _commit_log_boundaries(data)
            record = rng.randrange(len(entries) - 1)
            count = (entries[record + 1] - entries[record] - RECORD_HEAD_BYTES) // 16
            entry = entries[record] + RECORD_HEAD_BYTES + 16 * rng.randrange(max(count, 1))
            byte, bit = entry + 8, rng.randrange(3)
        if path.suffix == ".idx" and len(data) > 8 and rng.random() < 0.5:
            # An entry's relative offset or position off by a little: plausible, in order.
            entry = rng.randrange((len(data) - 8) // 20)
            byte, bit = 8 + 20 * entry + rng.choice((0, 4)), rng.randrange(3)
        changed = bytearray(data)
        changed[byte] ^= 1 << bit
        path.write_bytes(bytes(changed))
        return f"bit {bit} of byte {byte} flipped"
    if damage == "garbage":
        extra = rng.randbytes(rng.randrange(1, 64))
        path.write_bytes(data + extra)
        return f"{len(extra)} bytes appended"
    cuts = _boundaries(path, data)[:-1] if damage == "cut_boundary" else None
    if cuts is None:
        inside = [n for n in range(1, len(data)) if n not in set(_boundaries(path, data))]
        at = rng.choice(inside or [len(data) - 1])
    else:
        at = rng.choice(cuts)
    path.write_bytes(data[:at])
    return f"cut to {at} of {len(data)} bytes"


# --- reading back and judging ---------------------------------------------------------------


def _names(error: BaseException, path: Path) -> bool:
    text = str(error)
    return str(path) in text or (path.name in text and str(path.parent) in text)


def _read_topic(tmq: Twain, template: Template, seek_step: int = 9) -> str:
    """'read correctly' or raise; 'wrong: ...' if the data read is not what was written.
    Then seeks to every ``seek_step``-th offset (they use the indexes)."""
    got: dict[int, list[tuple[int, int, str]]] = {p: [] for p in range(PARTITIONS)}
    limit = 4 * PARTITIONS * PER_PARTITION
    with tmq.consumer("t") as consumer:
        for _ in range(limit):
            message = consumer.poll()
            if message is None:
                break
            got[message.partition].append((message.offset, message.key, message.message))
        if got != template.expected:
            counts = {p: len(m) for p, m in got.items()}
            return f"wrong: read {counts} messages without an error, wrote {template.ends}"
        # Seeks use the indexes: each must land on its record.
        for partition, messages in template.expected.items():
            for offset, key, text in messages[::seek_step]:
                consumer.assign({partition: offset})
                message = consumer.poll()
                if message is None or (message.offset, message.key, message.message) != (
                    offset,
                    key,
                    text,
                ):
                    return f"wrong: a seek to {partition}:{offset} read {message}"
    # Offsets never reused: the next write of each partition gets the next offset.
    with tmq.producer("t", partitioner=lambda key, partitions: key % partitions) as producer:
        for partition in range(PARTITIONS):
            offset = producer.write_message(partition, "after").offset
            if offset != template.ends[partition]:
                return f"wrong: next write got offset {offset}, not {template.ends[partition]}"
    return "read correctly"


def _read_group(tmq: Twain, template: Template) -> str:
    with tmq.consumer("t", group="g") as group:
        first: dict[int, int] = {}
        deadline = time.monotonic() + 5
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            message = group.poll(timeout=0.2)
            if message is not None:
                first.setdefault(message.partition, message.offset)
    # Where it committed, or the oldest offset retention kept if that is later.
    expected = {p: max(o, template.expected[p][0][0]) for p, o in COMMITTED.items()}
    if first != expected:
        return f"wrong: the group resumed at {first}, not at {expected}"
    return "read correctly"


def _check_says_damaged(root: Path) -> bool | None:
    """What the read-only check says before anything is opened (None: it raised, as the
    consumer must then)."""
    try:
        config = read_config(root, "t")
        damaged = any(p.damaged for p in check_topic(root, config))
        paths = GroupPaths.of(root, "t", "g")
        state = load_state(paths)
        read_commits(paths, state)
    except GroupFileCorruptError:
        return True
    except TwainMQError:
        return None
    return damaged


def _run_case(case_dir: Path, template: Template, kind: str, damage: str, rng: random.Random
              ) -> tuple[str, str]:  # fmt: skip
    root = case_dir / "store"
    shutil.copytree(template.root, root)
    path = _pick_file(root, kind, rng)
    what = f"{path.relative_to(root)} {_damage(path, damage, rng)}"
    check_damaged = _check_says_damaged(root)
    if kind.startswith("group"):
        reader: Callable[[Twain], str] = lambda tmq: _read_group(tmq, template)  # noqa: E731
    else:
        step = 1 if kind.endswith("index") else 9  # every offset when an index was damaged
        reader = lambda tmq: _read_topic(tmq, template, step)  # noqa: E731
    try:
        result = reader(Twain(root))
    except TwainMQError as error:
        if not _names(error, path):
            return "other", f"{what}: error naming another file: {error}"
        outcome = "detected"
    except Exception as error:
        return "other", f"{what}: {type(error).__name__}: {error}"
    else:
        if result != "read correctly":
            return "other", f"{what}: {result}"
        outcome = "read correctly"
    if check_damaged is not None and check_damaged != (outcome == "detected"):
        return "other", f"{what}: twainmq check says damaged={check_damaged}, consumer {outcome}"
    if outcome == "detected" and kind.startswith("group"):
        # `twainmq groups reset` repairs: the group then resumes where it was reset to.
        reset_offsets(GroupPaths.of(root, "t", "g"), COMMITTED, partitions=PARTITIONS)
        repaired = _read_group(Twain(root), template)
        if repaired != "read correctly":
            return "other", f"{what}: after groups reset: {repaired}"
    return outcome, what


@pytest.mark.slow  # TWAINMQ_FUZZ_SECONDS (20) of fuzzing: CI runs it, the plain local run does not
def test_damaged_files_are_read_correctly_or_reported_naming_the_file(
    templates: dict[str, Template], tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    combos = [(kind, damage) for kind in KINDS for damage in DAMAGES]
    counts: Counter[tuple[str, str]] = Counter()
    findings: list[str] = []
    deadline = time.monotonic() + FUZZ_SECONDS
    number = 0
    while number < len(combos) or time.monotonic() < deadline:
        kind, damage = combos[number % len(combos)]
        template = templates["kept" if kind == "log_start" or rng.random() < 0.3 else "plain"]
        case_dir = tmp_path / f"case{number}"
        outcome, what = _run_case(case_dir, template, kind, damage, rng)
        shutil.rmtree(case_dir, ignore_errors=True)
        counts[kind, outcome] += 1
        counts[kind, "cases"] += 1
        if outcome == "other":
            findings.append(f"{kind}/{damage}: {what}")
        number += 1
    report = _report(counts)
    print(f"\ncorruption fuzzer, seed {SEED}, {number} cases in {FUZZ_SECONDS:g} s:\n{report}")
    if os.environ.get("TWAINMQ_FUZZ_REPORT"):
        Path(os.environ["TWAINMQ_FUZZ_REPORT"]).write_text(
            json.dumps({f"{k}/{o}": n for (k, o), n in sorted(counts.items())}, indent=1)
        )
    assert not findings, "\n".join(findings[:20])


def _report(counts: Counter[tuple[str, str]]) -> str:
    header = f"  {'file kind':<16} {'cases':>6} {'read correctly':>15} {'detected':>9} {'other':>6}"
    lines = [header]
    for kind in KINDS:
        lines.append(
            f"  {kind:<16} {counts[kind, 'cases']:>6} {counts[kind, 'read correctly']:>15} "
            f"{counts[kind, 'detected']:>9} {counts[kind, 'other']:>6}"
        )
    return "\n".join(lines)
