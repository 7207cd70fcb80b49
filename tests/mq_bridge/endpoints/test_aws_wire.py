"""The aws wire format and batching, pure (no server): `codec` and the output's mapping of
batch answers to per-message failures."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from mq_bridge import Message
from mq_bridge.endpoints.aws.codec import (
    MAX_BATCH_BYTES,
    Encoded,
    Encoder,
    InvalidMessageError,
    decode,
    entry_failure,
    split_batches,
)
from mq_bridge.endpoints.aws.output import _Destination
from mq_bridge.errors import EndpointError, is_retriable


def test_an_encoded_message_round_trips_through_decode() -> None:
    message = Message(b"body", {"k": "v", "mqb.src.x": "dropped"})
    encoded = Encoder(binary=False).encode(message)
    raw = {
        "Body": encoded.body,
        "MessageId": str(uuid.uuid4()),
        "MessageAttributes": encoded.attributes,
        "ReceiptHandle": "h",
    }
    back = decode(raw, "q", source_metadata=False)
    assert (back.id, back.payload, back.metadata) == (message.id, b"body", {"k": "v"})


def test_binary_mode_round_trips_any_bytes() -> None:
    message = Message(bytes(range(256)))
    encoded = Encoder(binary=True).encode(message)
    raw = {"Body": encoded.body, "MessageId": "not-a-uuid", "MessageAttributes": encoded.attributes}
    assert decode(raw, "q", False).payload == bytes(range(256))


def test_a_message_id_that_is_no_uuid_still_gives_a_stable_id() -> None:
    raw = {"Body": "x", "MessageId": "abc"}
    assert decode(raw, "q", False).id == decode(raw, "q", False).id


def test_batches_hold_at_most_ten_entries_and_256_kib() -> None:
    small = [(i, Encoded("x", {}, None, None, 100)) for i in range(25)]
    assert [len(b) for b in split_batches(small)] == [10, 10, 5]
    big = [(i, Encoded("x", {}, None, None, 100 * 1024)) for i in range(5)]
    assert [len(b) for b in split_batches(big)] == [2, 2, 1]
    huge = [(0, Encoded("x", {}, None, None, 2 * MAX_BATCH_BYTES)), (1, small[0][1])]
    assert [len(b) for b in split_batches(huge)] == [1, 1]
    order = [index for batch in split_batches(small) for index, _ in batch]
    assert order == list(range(25))


def test_fifo_entries_carry_group_and_deduplication_ids() -> None:
    message = Message(b"x", id=7)
    entry = Encoder(False, fifo=True, group_id="g").encode(message).sqs_entry("0")
    assert entry["MessageGroupId"] == "g"
    assert entry["MessageDeduplicationId"] == f"{7:032x}"
    content = Encoder(False, fifo=True, content_deduplication=True, group_id="g").encode(message)
    assert content.deduplication_id is None


def test_failed_entries_are_retriable_unless_the_sender_got_it_wrong() -> None:
    server = entry_failure({"Id": "0", "Code": "InternalError", "SenderFault": False}, "SQS")
    kms = {"Id": "0", "Code": "KMS.ThrottlingException", "SenderFault": True}
    throttled = entry_failure(kms, "SQS")
    bad = entry_failure({"Id": "0", "Code": "InvalidParameterValue", "SenderFault": True}, "SQS")
    assert is_retriable(server) and is_retriable(throttled)
    assert not is_retriable(bad) and isinstance(bad, InvalidMessageError)


def destination(answers: list[dict[str, Any]], fifo: bool = False) -> _Destination:
    calls = iter(answers)
    return _Destination(
        "SQS",
        Encoder(False, fifo=fifo, group_id="g"),
        lambda entries: next(calls),
        Encoded.sqs_entry,
        "aws:q",
    )


def succeeded(*ids: int) -> list[dict[str, str]]:
    return [{"Id": str(i), "MessageId": "m"} for i in ids]


def test_exactly_the_entries_sqs_failed_are_reported() -> None:
    answers = [
        {"Successful": succeeded(0, 1, 3, 4, 5, 6, 7, 8, 9), "Failed": [
            {"Id": "2", "Code": "InternalError", "SenderFault": False, "Message": "boom"}
        ]},
        {"Successful": succeeded(0, 1), "Failed": [
            {"Id": "2", "Code": "InvalidParameterValue", "SenderFault": True, "Message": "no"}
        ]},
    ]  # fmt: skip
    failures = destination(answers).send([Message(f"m{i}".encode()) for i in range(13)])
    assert sorted(failures) == [2, 12]
    assert is_retriable(failures[2]) and "boom" in str(failures[2])
    assert not is_retriable(failures[12])


def test_an_entry_sqs_did_not_answer_for_counts_as_failed() -> None:
    failures = destination([{"Successful": succeeded(0, 2)}]).send(
        [Message(b"a"), Message(b"b"), Message(b"c")]
    )
    assert list(failures) == [1] and isinstance(failures[1], EndpointError)


def test_on_a_fifo_queue_a_failure_fails_the_messages_after_it_too() -> None:
    answers = [{"Successful": succeeded(*range(9)), "Failed": [
        {"Id": "9", "Code": "InternalError", "SenderFault": False}
    ]}]  # fmt: skip
    failures = destination(answers, fifo=True).send([Message(b"x") for _ in range(15)])
    assert sorted(failures) == list(range(9, 15))


@pytest.mark.parametrize("fifo", [False, True])
def test_messages_that_cannot_be_sent_fail_before_any_call(fifo: bool) -> None:
    answers = [{"Successful": succeeded(0, 1)}]
    failures = destination(answers, fifo).send([Message(b"a"), Message(b""), Message(b"c")])
    assert list(failures) == [1] and not is_retriable(failures[1])
