"""The `file` endpoint through the endpoint interface: modes, progress, torn writes, fsync."""

from __future__ import annotations

import gc
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from mq_bridge.config.declarations import parse_options
from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.file import build_input, build_output
from mq_bridge.endpoints.file.input import FileInput
from mq_bridge.endpoints.file.options import FileOptions
from mq_bridge.endpoints.file.output import FileOutput
from mq_bridge.errors import ConfigError, SendError
from mq_bridge.message import Message

CONTEXT = BuildContext(route_name="test")


def file_options(path: Path, **options: Any) -> FileOptions:
    return parse_options(FileOptions, {"path": str(path), **options}, "file")


def writer(path: Path, **options: Any) -> FileOutput:
    output = build_output(file_options(path, **options), CONTEXT)
    output.connect()
    return output


def reader(path: Path, context: BuildContext = CONTEXT, **options: Any) -> FileInput:
    source = build_input(file_options(path, **options), context)
    source.connect()
    return source


def payloads(source: FileInput, max_messages: int = 100, timeout: float = 0.05) -> list[bytes]:
    return [m.payload for m in source.receive(max_messages, timeout).messages]


def messages(*payloads: bytes) -> list[Message]:
    return [Message(p) for p in payloads]


def test_publisher_creates_parent_directories_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "out.log"
    output = writer(path, format="raw")
    output.send(messages(b"one", b"two"))
    output.close()
    output = writer(path, format="raw")
    output.send_one(Message(b"three"))
    output.close()
    assert path.read_bytes() == b"one\ntwo\nthree\n"


def test_consume_reads_from_the_start_and_is_exhausted_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "in.log"
    path.write_bytes(b"a\nb\nc\n")
    source = reader(path, format="raw")
    assert not source.exhausted
    first = source.receive(2, 1.0)
    assert [m.payload for m in first.messages] == [b"a", b"b"]
    assert not source.exhausted
    last = source.receive(2, 1.0)
    assert [m.payload for m in last.messages] == [b"c"]
    assert source.exhausted
    assert source.status().pending == 0
    with path.open("ab") as file:  # a consumer keeps following appends
        file.write(b"d\n")
    assert payloads(source) == [b"d"]
    source.close()


def test_consume_holds_back_an_unterminated_last_record(tmp_path: Path, caplog) -> None:
    path = tmp_path / "torn.log"
    path.write_bytes(b"a\nb\npartial-rec")
    source = reader(path, format="raw")
    with caplog.at_level(logging.WARNING):
        assert payloads(source) == [b"a", b"b"]
        assert payloads(source) == []
    assert source.exhausted
    assert source.status().details["incomplete_tail_bytes"] == len(b"partial-rec")
    assert "not delivered until their delimiter" in caplog.text
    with path.open("ab") as file:  # the writer finishes the record
        file.write(b"ord\n")
    assert payloads(source) == [b"partial-record"]
    source.close()


def test_a_new_publisher_terminates_a_torn_record_so_records_never_merge(tmp_path: Path) -> None:
    path = tmp_path / "crashed.log"
    output = writer(path)
    output.send(messages(b"kept"))
    output.close()
    with path.open("ab") as file:
        file.write(b'{"message_id":"0190')  # what a writer killed mid-record leaves
    output = writer(path)
    output.send(messages(b"after"))
    output.close()
    source = reader(path)
    assert payloads(source) == [b"kept", b"after"]
    assert source.status().details["skipped_records"] == 1
    source.close()


def test_subscribe_starts_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "tail.log"
    path.write_bytes(b"old\nhalf-writ")
    source = reader(path, format="raw", mode="subscribe")
    assert payloads(source) == []
    with path.open("ab") as file:
        file.write(b"ten\nnew\n")  # the record in progress at subscribe time is not ours
    assert payloads(source) == [b"new"]
    assert not source.exhausted
    source.close()


def test_group_subscribe_resumes_after_the_last_acked_record(tmp_path: Path) -> None:
    path = tmp_path / "orders.log"
    output = writer(path)
    output.send(messages(b"m0", b"m1", b"m2", b"m3"))
    source = reader(path, mode="group_subscribe", group_id="billing")
    source.ack(source.receive(2, 1.0))
    unacked = source.receive(2, 1.0)
    assert [m.payload for m in unacked.messages] == [b"m2", b"m3"]
    source.close()
    progress = json.loads((tmp_path / "orders.log.billing.offset").read_text())
    assert progress["group_id"] == "billing" and progress["offset"] > 0
    again = reader(path, mode="group_subscribe", group_id="billing")
    assert payloads(again) == [b"m2", b"m3"]
    other = reader(path, mode="group_subscribe", group_id="audit")
    assert payloads(other) == [b"m0", b"m1", b"m2", b"m3"]
    tail = reader(path, mode="group_subscribe", group_id="late", read_from_tail=True)
    assert payloads(tail) == []
    output.send(messages(b"m4"))
    assert payloads(tail) == [b"m4"]
    for endpoint in (again, other, tail, output):
        endpoint.close()


def test_group_progress_beyond_a_replaced_file_restarts_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "rotated.log"
    path.write_bytes(b"x\n")
    (tmp_path / "rotated.log.g.offset").write_text('{"offset": 999, "group_id": "g"}')
    source = reader(path, format="raw", mode="group_subscribe", group_id="g")
    assert payloads(source) == [b"x"]
    source.close()


def test_nack_redelivers_and_acks_of_batches_it_rewound_over_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "n.log"
    path.write_bytes(b"a\nb\nc\n")
    source = reader(path, format="raw", mode="group_subscribe", group_id="g")
    first, second = source.receive(1, 1.0), source.receive(1, 1.0)
    source.nack(first)
    source.ack(second)  # rewound over: b comes again, so its ack must not commit
    assert payloads(source) == [b"a", b"b", b"c"]
    source.close()
    assert not (tmp_path / "n.log.g.offset").exists()


def test_nacking_every_outstanding_batch_in_any_order_rewinds_to_the_oldest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "n.log"
    path.write_bytes(b"a\nb\nc\n")
    for order in (list, lambda batches: list(reversed(batches))):
        source = reader(path, format="raw")
        batches = [source.receive(1, 1.0) for _ in range(3)]
        for batch in order(batches):
            source.nack(batch)
        assert payloads(source) == [b"a", b"b", b"c"]
        source.close()


def test_an_ack_overlapping_what_was_acked_after_a_rewind_keeps_progress_going(
    tmp_path: Path,
) -> None:
    path = tmp_path / "n.log"
    path.write_bytes(b"a\nb\nc\nd\n")
    source = reader(path, format="raw", mode="group_subscribe", group_id="g")
    first, second = source.receive(1, 1.0), source.receive(1, 1.0)
    source.nack(first)
    again = source.receive(1, 1.0)  # a
    source.ack(again)
    source.ack(second)  # b was handled: progress moves past it
    rest = source.receive(10, 1.0)  # b (again), c, d
    assert [m.payload for m in rest.messages] == [b"b", b"c", b"d"]
    source.ack(rest)
    source.close()
    resumed = reader(path, format="raw", mode="group_subscribe", group_id="g")
    assert payloads(resumed) == []
    resumed.close()


def test_delete_removes_acknowledged_records_only(tmp_path: Path) -> None:
    path = tmp_path / "queue.log"
    path.write_bytes(b"a\nb\nc\n")
    source = reader(path, format="raw", delete=True)
    source.ack(source.receive(2, 1.0))
    unacked = source.receive(5, 1.0)
    assert [m.payload for m in unacked.messages] == [b"c"]
    source.close()
    assert path.read_bytes() == b"c\n"
    source = reader(path, format="raw", delete=True)
    source.ack(source.receive(5, 1.0))
    assert path.read_bytes() == b""  # all acked at the end of the file: removed at once
    source.close()


def test_subscribe_with_delete_removes_only_what_it_acked(tmp_path: Path) -> None:
    path = tmp_path / "bus.log"
    path.write_bytes(b"before\n")
    source = reader(path, format="raw", mode="subscribe", delete=True)
    output = writer(path, format="raw")
    output.send(messages(b"x", b"y"))
    source.ack(source.receive(1, 5.0))
    source.close()
    output.close()
    assert path.read_bytes() == b"before\ny\n"


def test_delete_keeps_reading_correctly_after_a_rewrite(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("mq_bridge.endpoints.file.input._COMPACT_AT", 4)
    path = tmp_path / "queue.log"
    path.write_bytes(b"".join(b"r%d\n" % i for i in range(10)))
    source = reader(path, format="raw", delete=True)
    got = []
    while batch := source.receive(3, 0.05):
        got += [m.payload for m in batch.messages]
        source.ack(batch)
    source.close()
    assert got == [b"r%d" % i for i in range(10)]
    assert path.read_bytes() == b""


def test_hex_delimiter_and_multi_byte_text_delimiter(tmp_path: Path) -> None:
    for delimiter, raw in (("0x00", b"\x00"), ("--", b"--")):
        path = tmp_path / f"d{len(raw)}.log"
        output = writer(path, format="raw", delimiter=delimiter)
        output.send(messages(b"x", b"y"))
        output.close()
        assert path.read_bytes() == b"x" + raw + b"y" + raw
        source = reader(path, format="raw", delimiter=delimiter)
        assert payloads(source) == [b"x", b"y"]
        source.close()


def test_a_payload_containing_the_delimiter_fails_alone(tmp_path: Path) -> None:
    output = writer(tmp_path / "raw.log", format="raw")
    with pytest.raises(SendError) as raised:
        output.send(messages(b"ok", b"bad\n", b"ok2"))
    assert list(raised.value.failures) == [1]
    output.close()
    assert (tmp_path / "raw.log").read_bytes() == b"ok\nok2\n"


@pytest.mark.parametrize("fsync", ["off", "batch", "periodic", "always"])
def test_every_fsync_policy_writes_everything(tmp_path: Path, fsync: str) -> None:
    path = tmp_path / "sync.log"
    output = writer(path, fsync=fsync, fsync_interval_ms=0)
    output.send(messages(b"a", b"b"))
    output.send_one(Message(b"c"))
    output.flush()
    source = reader(path)
    assert payloads(source) == [b"a", b"b", b"c"]
    output.close()
    source.close()


def test_single_sends_are_buffered_at_most_linger_ms(tmp_path: Path) -> None:
    path = tmp_path / "linger.log"
    output = writer(path, format="raw", linger_ms=60_000)
    output.send_one(Message(b"buffered"))
    assert path.read_bytes() == b""
    output.send(messages(b"batch"))  # a batch goes out with what was buffered before it
    assert path.read_bytes() == b"buffered\nbatch\n"
    output.send_one(Message(b"late"))
    output.close()
    assert path.read_bytes() == b"buffered\nbatch\nlate\n"


def test_the_linger_thread_writes_buffered_sends(tmp_path: Path) -> None:
    path = tmp_path / "linger.log"
    output = writer(path, format="raw", linger_ms=1)
    output.send_one(Message(b"soon"))
    source = reader(path, format="raw")
    assert payloads(source, timeout=10.0) == [b"soon"]
    output.close()
    source.close()


def test_unbuffered_single_sends_are_written_before_returning(tmp_path: Path) -> None:
    path = tmp_path / "direct.log"
    output = writer(path, format="raw", linger_ms=0)
    output.send_one(Message(b"now"))
    assert path.read_bytes() == b"now\n"
    output.close()


def test_a_publisher_collected_without_close_still_writes_its_buffer(tmp_path: Path) -> None:
    path = tmp_path / "gc.log"
    output = writer(path, format="raw", linger_ms=60_000)
    output.send_one(Message(b"kept"))
    del output
    gc.collect()
    assert path.read_bytes() == b"kept\n"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"format": "xml"}, "file.format"),
        ({"mode": "group_subscribe"}, "file.group_id"),
        ({"mode": "group_subscribe", "group_id": "../x"}, "file.group_id"),
        ({"mode": "group_subscribe", "group_id": "g", "delete": True}, "file.delete"),
        ({"delimiter": "0xZZ"}, "file.delimiter"),
    ],
)
def test_bad_options_name_the_field(tmp_path: Path, options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        build_input(file_options(tmp_path / "x.log", **options), CONTEXT)


def test_use_after_close_raises_closed(tmp_path: Path) -> None:
    output = writer(tmp_path / "c.log")
    output.close()
    with pytest.raises(RuntimeError, match="closed"):
        output.send_one(Message(b"x"))


def test_source_metadata_names_the_file_and_offset_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "src.log"
    path.write_bytes(b"ab\nnot an envelope\ncd\n")
    source = reader(path, BuildContext(route_name="test", source_metadata=True), format="raw")
    got = [m.metadata for m in source.receive(10, 1.0).messages]
    source.close()
    assert [m["mqb.src.file_offset"] for m in got] == ["0", "3", "19"]
    assert got[0]["mqb.src.file_path"] == str(path)
    path.unlink()
    output = writer(path)
    output.send(messages(b"one"))
    with path.open("ab") as file:
        file.write(b"garbage\n")  # a record that cannot be decoded
    output.send(messages(b"two"))
    output.close()
    source = reader(path, BuildContext(route_name="test", source_metadata=True))
    got = [m.metadata["mqb.src.file_offset"] for m in source.receive(10, 1.0).messages]
    source.close()
    second = path.read_bytes().index(b"garbage\n") + len(b"garbage\n")
    assert got == ["0", str(second)]


def test_a_file_truncated_under_a_reader_is_reported_in_status(tmp_path: Path) -> None:
    path = tmp_path / "cut.log"
    path.write_bytes(b"a\nb\n")
    source = reader(path, format="raw", mode="group_subscribe", group_id="g")
    assert payloads(source) == [b"a", b"b"]
    path.write_bytes(b"")
    assert payloads(source) == []
    status = source.status()
    assert not status.healthy and "shrank" in (status.error or "")
    source.close()


@pytest.mark.parametrize("fmt", ["raw", "normal"])
def test_batches_are_full_across_reads_and_offsets_stay_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    monkeypatch.setattr("mq_bridge.endpoints.file.input._CHUNK", 64)  # many short reads
    path = tmp_path / "many.log"
    output = writer(path, format=fmt)
    output.send(messages(*(b"record-%03d" % i for i in range(100))))
    output.close()
    source = reader(path, format=fmt, mode="group_subscribe", group_id="g")
    sizes, got = [], []
    while batch := source.receive(30, 0.05):
        sizes.append(len(batch.messages))
        got += [m.payload for m in batch.messages]
        source.ack(batch)
    assert sizes == [30, 30, 30, 10]
    assert got == [b"record-%03d" % i for i in range(100)]
    assert source.status().details["acked"] == path.stat().st_size
    source.close()


def test_a_record_many_reads_long_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mq_bridge.endpoints.file.input._CHUNK", 16)
    path = tmp_path / "big.log"
    big = bytes(range(32, 127)) * 400
    path.write_bytes(b"a\n" + big + b"\nb\n")
    source = reader(path, format="raw")
    assert payloads(source) == [b"a", big, b"b"]
