import uuid

import pytest

from mq_bridge import Message


def test_a_new_message_has_no_id_until_it_travels_then_keeps_it():
    message = Message(b"x")
    assert message.id is None and Message.from_json({"a": 1}).id is None
    assigned = message.assigned_id()
    assert message.id == assigned == message.assigned_id()
    assert message.with_json({"b": 2}).id == assigned


def test_new_ids_are_uuid7_and_sort_in_creation_order():
    ids = [Message(b"x").assigned_id() for _ in range(20_000)]  # fills a millisecond's sequence
    assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122 for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == 20_000


def test_non_uuid_id_is_hashed_to_a_stable_uuid():
    a = Message(b"x", id="order-42").id
    assert a == Message(b"y", id="order-42").id
    assert a != Message(b"x", id="order-43").id
    assert uuid.UUID(a)


def test_hex_and_decimal_ids_are_taken_as_values():
    assert Message(b"", id="0x10").id == str(uuid.UUID(int=16))
    assert Message(b"", id="16").id == str(uuid.UUID(int=16))


def test_metadata_is_a_copy_and_with_json_keeps_id_and_metadata():
    m = Message.from_json({"a": 1}, {"kind": "k"})
    m.metadata["kind"] = "changed"
    assert m.metadata == {"kind": "k"}
    n = m.with_json({"a": 2})
    assert (n.id, n.metadata, n.json()) == (m.id, {"kind": "k"}, {"a": 2})


def test_json_error_names_the_problem():
    with pytest.raises(ValueError, match="not valid JSON"):
        Message(b"{nope").json()
    with pytest.raises(ValueError, match="not UTF-8"):
        Message(b"\xff").text()


def test_repr_hides_the_payload():
    assert "secret" not in repr(Message(b"secret"))


def test_ids_stay_ordered_when_a_millisecond_runs_out_of_sequence_numbers():
    from mq_bridge.message import uuid7_generator

    frozen = uuid7_generator(lambda: 1_700_000_000_000 * 1_000_000)
    ids = [frozen() for _ in range(10_000)]  # > 4096 in one millisecond
    assert ids == sorted(ids) and len(set(ids)) == 10_000
    assert all(uuid.UUID(int=value).version == 7 for value in ids)
    backwards = iter([5_000_000_000, 4_000_000_000, 4_000_000_000])
    stepping_back = uuid7_generator(lambda: next(backwards))
    made = [stepping_back() for _ in range(3)]
    assert made == sorted(made)


def test_json_round_trips_and_big_integers_serialize_exactly():
    value = {"n": 2**70, "text": "h\u00e9", "list": [1.5, None, True], 1: "int key"}
    message = Message.from_json(value)
    assert message.payload.startswith(b'{"n":1180591620717411303424,')
    assert message.json() == {
        "n": float(2**70),
        "text": "h\u00e9",
        "list": [1.5, None, True],
        "1": "int key",
    }
    with pytest.raises(ValueError, match="not JSON-serializable"):
        Message.from_json({"x": object()})


def test_ids_made_in_bulk_continue_the_same_ordered_sequence():
    from mq_bridge.message import uuid7_generators

    frozen_one, frozen_many = uuid7_generators(lambda: 1_700_000_000_000 * 1_000_000)
    ids = [frozen_one(), *frozen_many(3000), frozen_one(), *frozen_many(3000), *frozen_many(0)]
    assert len(ids) == 6002 and len(set(ids)) == 6002  # past 4096 in one millisecond
    assert ids == sorted(ids)
    assert all(uuid.UUID(int=value).version == 7 for value in ids)
    assert all(uuid.UUID(int=value).variant == uuid.RFC_4122 for value in ids)
    live_one, live_many = uuid7_generators()
    made = [*live_many(5), live_one(), *live_many(1)]
    assert made == sorted(made) and len(set(made)) == 7


def test_messages_with_new_ids_share_the_metadata_and_get_ids():
    from mq_bridge.message import messages_with_new_ids

    metadata = {"k": "v"}
    made = messages_with_new_ids([b"a", b"b"], metadata)
    assert [(m.payload, m.metadata) for m in made] == [(b"a", metadata), (b"b", metadata)]
    assert made[0].metadata_view is made[1].metadata_view is metadata
    assert made[0].id is not None and made[0].id_int < made[1].id_int
    assert messages_with_new_ids([], metadata) == []


def test_messages_from_envelopes_refuses_a_reserved_metadata_prefix():
    from mq_bridge.message import messages_from_envelopes

    envelope = {"message_id": str(uuid.UUID(int=5)), "payload": "p", "metadata": {"x.y": "1"}}
    (message,) = messages_from_envelopes([envelope], "mqb.")
    assert message.metadata == {"x.y": "1"} and message.id_int == 5
    reserved = {**envelope, "metadata": {"mqb.src.topic": "t"}}
    with pytest.raises(ValueError, match="mqb"):
        messages_from_envelopes([envelope, reserved], "mqb.")
    assert messages_from_envelopes([reserved])[0].metadata == {"mqb.src.topic": "t"}
