from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from mq_bridge.config.declarations import parse_options
from mq_bridge.errors import ConfigError, RetryableError, SendError
from mq_bridge.message import Message
from mq_bridge.middleware import deduplication
from mq_bridge.middleware._seen_ids import open_seen_ids
from mq_bridge.middleware.deduplication import DeduplicationOptions

from .endpoints import ListInput, ListOutput, context_with, numbered


def options(tmp_path, **more) -> DeduplicationOptions:
    settings = {"ttl_seconds": 3600, "store": f"sqlite://{tmp_path}/dedup.db", **more}
    return parse_options(DeduplicationOptions, settings, "deduplication")


def test_output_sends_each_id_once(tmp_path):
    output = ListOutput()
    wrapped = deduplication.wrap_output(output, options(tmp_path), context_with({}))
    messages = numbered(3)
    wrapped.send(messages)
    wrapped.send([messages[1], Message(b"new")])
    assert [m.payload for m in output.sent][-1] == b"new"
    assert len(output.sent) == 4


def test_output_remembers_only_what_was_sent(tmp_path):
    first_try = {"n": 0}

    def fail_first_once(message, attempt):
        return RetryableError("busy") if message.json() == first_try and attempt == 1 else None

    output = ListOutput(fail_first_once)
    wrapped = deduplication.wrap_output(output, options(tmp_path), context_with({}))
    messages = numbered(2)
    with pytest.raises(SendError) as raised:
        wrapped.send(messages)
    assert list(raised.value.failures) == [0]
    wrapped.send(messages)  # the failed one goes out now, the other is not sent twice
    assert [m.json()["n"] for m in output.sent] == [1, 0]


def test_failure_indexes_point_into_the_callers_batch(tmp_path):
    output = ListOutput(lambda m, a: RetryableError("busy") if m.json()["n"] == 2 else None)
    wrapped = deduplication.wrap_output(output, options(tmp_path), context_with({}))
    messages = numbered(3)
    wrapped.send(messages[:1])
    with pytest.raises(SendError) as raised:
        wrapped.send(messages)
    assert list(raised.value.failures) == [2]


def test_input_drops_duplicates_but_acks_them(tmp_path):
    messages = numbered(3)
    source = ListInput([messages[0], messages[1], messages[0], messages[2], messages[1]])
    wrapped = deduplication.wrap_input(source, options(tmp_path), context_with({}))
    first = wrapped.receive(2, 0)
    wrapped.ack(first)
    second = wrapped.receive(10, 0)
    assert [m.json()["n"] for m in second.messages] == [2]
    wrapped.ack(second)
    assert len(source.acked) == 5


def test_input_remembers_ids_only_once_acked_so_a_nack_redelivers(tmp_path):
    messages = numbered(2)
    source = ListInput(messages)
    wrapped = deduplication.wrap_input(source, options(tmp_path), context_with({}))
    batch = wrapped.receive(10, 0)
    wrapped.nack(batch)
    again = wrapped.receive(10, 0)
    assert again.messages == messages
    wrapped.ack(again)


def test_an_all_duplicate_batch_is_acked_in_order_after_earlier_open_batches(tmp_path):
    messages = numbered(2)
    source = ListInput([messages[0], messages[1], messages[0]])
    wrapped = deduplication.wrap_input(source, options(tmp_path), context_with({}))
    first = wrapped.receive(1, 0)
    wrapped.ack(first)
    second = wrapped.receive(1, 0)  # messages[1], left open
    assert wrapped.receive(1, 0).messages == []  # messages[0] again: a duplicate, read past
    assert len(source.acked) == 1  # the duplicate waits for the open batch before it
    wrapped.ack(second)
    assert source.acked == [messages[0], messages[1], messages[0]]


@pytest.mark.parametrize("key", ["metadata:order", "${metadata:order}"])
def test_metadata_key_forms(tmp_path, key):
    output = ListOutput()
    wrapped = deduplication.wrap_output(output, options(tmp_path, key=key), context_with({}))
    wrapped.send([Message(b"a", {"order": "7"}), Message(b"b", {"order": "7"}), Message(b"c")])
    assert [m.payload for m in output.sent] == [b"a", b"c"]  # no key: falls back to the id


def test_payload_field_key(tmp_path):
    output = ListOutput()
    key = "${payload:order.id}"
    wrapped = deduplication.wrap_output(output, options(tmp_path, key=key), context_with({}))
    wrapped.send(
        [
            Message.from_json({"order": {"id": 7}, "v": 1}),
            Message.from_json({"order": {"id": 7}, "v": 2}),
            Message.from_json({"order": {"id": "7"}, "v": 3}),  # a string, not the number 7
            Message(b"not json"),
        ]
    )
    assert [m.payload for m in output.sent][-1] == b"not json"
    assert [m.json()["v"] for m in output.sent[:-1]] == [1, 3]


def test_ids_expire_after_the_ttl(tmp_path):
    seen = open_seen_ids(f"{tmp_path}/ttl.db", ttl=3600)
    seen.add(["a"])
    assert seen.known(["a", "b"]) == {"a"}
    seen.ttl = -1  # everything added is now older than the window
    assert seen.known(["a"]) == set()


def test_seen_ids_survive_a_killed_process(tmp_path):
    store = tmp_path / "crash.db"
    script = textwrap.dedent(
        f"""
        import os, signal
        from mq_bridge.middleware._seen_ids import open_seen_ids
        open_seen_ids({str(store)!r}, 3600).add(["kept-1", "kept-2"])
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    child = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert open_seen_ids(str(store), 3600).known(["kept-1", "kept-2", "x"]) == {"kept-1", "kept-2"}


def test_bad_options_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"deduplication\.store"):
        deduplication.wrap_output(
            ListOutput(), options(tmp_path, store="redis://x"), context_with({})
        )
    with pytest.raises(ConfigError, match=r"deduplication\.key"):
        deduplication.wrap_output(ListOutput(), options(tmp_path, key="payload"), context_with({}))
    with pytest.raises(ConfigError, match=r"deduplication\.ttl_seconds"):
        no_ttl = parse_options(DeduplicationOptions, {"ttl_seconds": 0}, "deduplication")
        deduplication.wrap_output(ListOutput(), no_ttl, context_with({}))
