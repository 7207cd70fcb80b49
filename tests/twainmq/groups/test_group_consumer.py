"""The group consumer through the public API: Twain.consumer(topic, group=...)."""

import threading

import pytest

from tests.helpers import wait_until
from tests.seed_samples import CONSUME, CREATE_TOPIC, GROUPS, PRODUCE
from twainmq import ClosedError, Twain
from twainmq.groups import CommitFencedError, PartitionNotOwnedError, group_lag


@pytest.fixture
def tmq(tmp_path):
    store = Twain(tmp_path / "store")
    store.create_topic("events", partitions=4)
    return store


def write(tmq, count, start=0):
    with tmq.producer("events") as producer:
        for i in range(start, start + count):
            producer.write_message(i, f"m{i}")


def drain(consumer, expected, timeout=10.0):
    got = []
    assert wait_until(lambda: got.extend(consumer.poll_many(100)) or len(got) >= expected, timeout)
    return got


def run_sample(code, namespace, root):
    """Run a seed sample with the guide's store directory, /tmp/twain, moved to `root`."""
    exec(code.replace("/tmp/twain", str(root)), namespace)


def run_create_and_produce(namespace, root):
    run_sample(CREATE_TOPIC, namespace, root)
    run_sample(PRODUCE, namespace, root)


def test_the_seed_consuming_sample_reads_and_commits(tmp_path, capsys):
    namespace = {"Twain": Twain}
    run_create_and_produce(namespace, tmp_path)
    run_sample(CONSUME, namespace, tmp_path)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2
    assert any("Hello world" in line for line in printed)
    assert all(line.startswith("Message(") for line in printed)
    consumer = namespace["consumer"]
    assert sum(consumer.committed().values()) == 1  # one message read before commit()
    consumer.close()


def test_the_seed_group_sample_shares_the_partitions(tmp_path):
    namespace = {"Twain": Twain}
    run_create_and_produce(namespace, tmp_path)
    run_sample(GROUPS, namespace, tmp_path)
    c1, c2 = namespace["c1"], namespace["c2"]
    assert wait_until(
        lambda: (c1.poll(), c2.poll(), len(c1.assignment()) == len(c2.assignment()) == 2)[2]
    )
    assert sorted(c1.assignment() + c2.assignment()) == [0, 1, 2, 3]
    c1.close()
    assert wait_until(lambda: (c2.poll(), c2.assignment() == [0, 1, 2, 3])[1])
    c2.close()


def test_a_new_member_resumes_after_the_commit(tmq):
    write(tmq, 100)
    with tmq.consumer("events", group="g") as first:
        taken = drain(first, 40)[:40]
    # nothing committed: a new member starts over
    with tmq.consumer("events", group="g") as second:
        assert len(drain(second, 100)) == 100
        second.commit()
    write(tmq, 10, start=100)
    with tmq.consumer("events", group="g", start_from="now") as third:
        rest = drain(third, 10)
    assert sorted(m.message for m in rest) == sorted(f"m{i}" for i in range(100, 110))
    assert taken


def test_start_from_now_skips_what_was_there_and_sticks_to_the_group_creation(tmq):
    write(tmq, 20)
    first = tmq.consumer("events", group="g", start_from="now")
    write(tmq, 8, start=20)
    second = tmq.consumer("events", group="g", start_from="now")
    got = []
    assert wait_until(
        lambda: got.extend(first.poll_many(10) + second.poll_many(10)) or len(got) >= 8
    )
    assert sorted(m.message for m in got) == sorted(f"m{i}" for i in range(20, 28))
    first.close()
    second.close()


def test_explicit_commits_and_fencing(tmq):
    write(tmq, 40)
    c1 = tmq.consumer("events", group="g")
    c2 = tmq.consumer("events", group="g")
    assert wait_until(lambda: (c1.poll(), c2.poll(), len(c1.assignment()) == 2)[2])
    mine, theirs = c1.assignment(), c2.assignment()
    c1.commit({mine[0]: 3})
    assert c2.committed()[mine[0]] == 3
    with pytest.raises(CommitFencedError, match=str(theirs[0])):
        c1.commit({theirs[0]: 1})
    with pytest.raises(PartitionNotOwnedError):
        c1.seek(theirs[0], 0)
    c1.close()
    c2.close()


def test_callbacks_see_assignments_and_a_commit_in_on_revoke_hands_over_exactly(tmq):
    write(tmq, 400)
    events = []
    consumer = None

    def on_revoke(partitions):
        events.append(("revoke", partitions))
        consumer.commit()

    consumer = tmq.consumer(
        "events",
        group="g",
        on_assign=lambda ps: events.append(("assign", ps)),
        on_revoke=on_revoke,
    )
    assert events == [("assign", [0, 1, 2, 3])]
    got = [m.message for m in consumer.poll_many(150)]
    other = tmq.consumer("events", group="g")

    def collect() -> bool:
        got.extend(m.message for m in consumer.poll_many(100) + other.poll_many(100))
        return len(got) >= 400 and len(consumer.assignment()) == 2

    assert wait_until(collect)
    assert events[1][0] == "revoke" and len(events[1][1]) == 2
    assert sorted(got) == sorted(f"m{i}" for i in range(400))  # none lost, none twice
    consumer.close()
    other.close()


def test_lag_per_partition(tmq):
    write(tmq, 40)
    with tmq.consumer("events", group="g") as consumer:
        read = drain(consumer, 40)
        consumer.commit()
        consumer.commit({read[0].partition: 0})
        lag = consumer.lag()
        assert sorted(lag) == [0, 1, 2, 3]
        assert sum(entry.end_offset for entry in lag.values()) == 40
        zero = lag[read[0].partition]
        assert zero.committed == 0 and zero.lag == zero.end_offset
    whole_group = group_lag(tmq, "events", "g")
    assert whole_group[read[0].partition].lag == zero.end_offset
    assert sum(entry.lag for entry in whole_group.values()) == zero.end_offset  # others: none


def test_seek_to_timestamp_rewinds_owned_partitions(tmq):
    write(tmq, 12)
    with tmq.consumer("events", group="g") as consumer:
        assert len(drain(consumer, 12)) == 12
        assert consumer.seek_to_timestamp(0) == consumer.beginning_offsets()
        assert len(drain(consumer, 12)) == 12


def test_poll_with_timeout_waits_for_a_message_written_later(tmq):
    with tmq.consumer("events", group="g") as consumer:
        assert consumer.poll() is None
        timer = threading.Timer(0.2, write, args=(tmq, 1))
        timer.start()
        message = consumer.poll(timeout=10)
        timer.join()
    assert message is not None and message.message == "m0"


def test_members_in_threads_consume_everything_exactly_once_without_churn(tmq):
    write(tmq, 2000)
    results: list[list[str]] = [[], [], []]
    members = [tmq.consumer("events", group="g") for _ in results]
    done = threading.Event()

    def consume(index):
        while not done.is_set():
            results[index].extend(m.message for m in members[index].poll_many(50, timeout=0.05))

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    assert wait_until(lambda: sum(map(len, results)) >= 2000, 30)
    done.set()
    for thread in threads:
        thread.join()
    everything = [m for r in results for m in r]
    assert sorted(everything) == sorted(f"m{i}" for i in range(2000))
    for member in members:
        member.close()


def test_bad_options_name_the_value(tmq):
    with pytest.raises(ValueError, match="'later'"):
        tmq.consumer("events", group="g", start_from="later")
    with pytest.raises(ValueError, match="session_timeout"):
        tmq.consumer("events", group="g", session_timeout=0)
    with pytest.raises(ValueError, match="'a/b'"):
        tmq.consumer("events", group="a/b")


def test_a_closed_group_consumer_refuses_work(tmq):
    consumer = tmq.consumer("events", group="g")
    consumer.close()
    consumer.close()  # twice is harmless
    with pytest.raises(ClosedError):
        consumer.poll()
    with pytest.raises(ClosedError):
        consumer.commit()


def test_iteration_seek_and_position_on_owned_partitions(tmq):
    write(tmq, 20)
    with tmq.consumer("events", group="g") as consumer:
        first = list(consumer)
        assert len(first) == 20
        partition = first[0].partition
        assert consumer.position(partition) == tmq.end_offsets("events")[partition]
        consumer.seek(partition, 0)
        again = list(consumer)
        assert {m.partition for m in again} == {partition}
        assert len(again) == tmq.end_offsets("events")[partition]
