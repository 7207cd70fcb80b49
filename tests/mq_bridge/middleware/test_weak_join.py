from __future__ import annotations

import pytest

from mq_bridge.config.declarations import parse_options
from mq_bridge.errors import ConfigError
from mq_bridge.message import Message
from mq_bridge.middleware import weak_join
from mq_bridge.middleware.weak_join import WeakJoinOptions

from .endpoints import ListInput, context_with


def member(key: str | None, value, **metadata: str) -> Message:
    if key is not None:
        metadata["correlation_id"] = key
    return Message.from_json(value, metadata)


def join(source: ListInput, **options):
    settings = {"group_by": "correlation_id", "expected_count": 2, "timeout_ms": 60_000}
    parsed = parse_options(WeakJoinOptions, {**settings, **options}, "weak_join")
    return weak_join.wrap_input(source, parsed, context_with({}))


def test_count_mode_joins_members_into_a_json_array_and_passes_others_through():
    plain = Message(b"plain")
    source = ListInput([member("a", 1), plain, member("b", 10), member("a", 2)])
    batch = join(source).receive(10, 0)
    assert batch.messages[0] == plain
    joined = batch.messages[1]
    assert joined.json() == [1, 2]
    assert joined.metadata["correlation_id"] == "a"
    assert joined.metadata["mqb.join.count"] == "2"
    assert joined.metadata["mqb.join.complete"] == "true"


def test_members_are_acked_only_with_their_joined_message_and_in_source_order():
    first, second = member("a", 1), member("a", 2)
    source = ListInput([first, member("b", 5), second], any_order=False)
    wrapped = join(source)
    batch = wrapped.receive(1, 0)  # reads on (within the timeout) until group a is complete
    assert batch.messages[0].json() == [1, 2]
    assert source.pending == []
    wrapped.ack(batch)
    assert source.acked == [first]  # b's batch is still open, so the third waits behind it


def test_branch_mode_waits_for_required_branches_and_keys_by_branch():
    source = ListInput(
        [
            member("o1", {"paid": True}, source="billing"),
            member("o1", {"late": 1}, source="shipping"),
            member("o1", {"late": 2}, source="shipping"),
            member("o1", {"x": 1}, source="crm"),
        ]
    )
    wrapped = join(source, branch_by="source", required=["billing", "crm"], expected_count=9)
    joined = wrapped.receive(10, 0).messages[0]
    assert joined.json() == {"billing": {"paid": True}, "shipping": {"late": 2}, "crm": {"x": 1}}


def test_an_incomplete_group_fires_at_its_timeout():
    source = ListInput([member("a", 1)])
    wrapped = join(source, timeout_ms=20)
    late = wrapped.receive(10, 0)
    if not late:
        late = wrapped.receive(10, 30)  # returns at the group's deadline, not after 30 s
    assert late.messages[0].json() == [1]
    assert late.messages[0].metadata["mqb.join.complete"] == "false"
    wrapped.ack(late)
    assert len(source.acked) == 1


def test_discard_on_timeout_drops_the_group_and_acks_its_members():
    source = ListInput([member("a", 1)])
    wrapped = join(source, timeout_ms=10, on_timeout="discard")
    assert wrapped.receive(10, 0).messages == []
    assert wrapped.receive(10, 0.5).messages == []
    assert len(source.acked) == 1


def test_nack_of_a_joined_message_redelivers_its_members():
    messages = [member("a", 1), member("a", 2)]
    source = ListInput(messages, any_order=True)
    wrapped = join(source)
    wrapped.nack(wrapped.receive(10, 0))
    again = wrapped.receive(10, 0)
    assert again.messages[0].json() == [1, 2]
    wrapped.ack(again)
    assert source.acked == messages and source.nacked == messages


class WholeListInput(ListInput):
    """Hands out everything it has in one batch, whatever `max_messages` says."""

    def receive(self, max_messages, timeout):
        return super().receive(100, timeout)


def test_nack_drops_waiting_messages_of_the_nacked_batches_as_they_come_again():
    messages = [member("a", 1), member("a", 2), Message(b"plain")]
    source = WholeListInput(messages, any_order=True)
    wrapped = join(source)
    first = wrapped.receive(1, 0)  # the joined message; plain waits in the wrapper
    assert first.messages[0].json() == [1, 2]
    wrapped.nack(first)  # the source batch held all three: they come again
    again = wrapped.receive(10, 0)
    assert [m.payload for m in again.messages] == [b"[1,2]", b"plain"]  # plain once, not twice


def test_ack_on_receive_settles_members_when_held():
    source = ListInput([member("a", 1)])
    wrapped = join(source, ack="on_receive")
    assert wrapped.receive(10, 0).messages == []
    assert len(source.acked) == 1


def test_bad_options_name_the_field():
    with pytest.raises(ConfigError, match=r"weak_join\.expected_count"):
        join(ListInput([]), expected_count=0)
    with pytest.raises(ConfigError, match=r"weak_join\.ack"):
        join(ListInput([]), ack="later")
