"""``twainmq groups``: list, describe and reset, run in-process."""

import pytest

from tests.helpers import wait_until
from twainmq import Twain
from twainmq.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path):
    tmq = Twain(tmp_path / "store")
    tmq.create_topic("events", partitions=2)
    with tmq.producer("events") as producer:
        for i in range(10):
            producer.write_message(i, f"m{i}")
    return tmq


def test_list_and_describe_an_active_group(store, capsys):
    root = str(store.root_dir)
    assert "no consumer groups" in run(capsys, "--root", root, "groups", "list")[1]
    consumer = store.consumer("events", group="readers")
    assert wait_until(lambda: len(consumer.poll_many(20)) == 0)
    consumer.commit()
    code, out, _ = run(capsys, "--root", root, "groups", "list")
    assert code == 0
    assert out.splitlines()[1].split() == ["events", "readers", "1", "1", "0"]
    code, out, _ = run(capsys, "--root", root, "groups", "describe", "events", "readers")
    assert code == 0
    assert "generation 1, active" in out and consumer.member_id in out and "alive" in out
    ends = store.end_offsets("events")
    for partition, end in ends.items():
        assert f"{partition} {consumer.member_id} {end} {end} 0" in " ".join(out.split())
    consumer.close()


def test_reset_an_inactive_group_to_start_end_offset_and_time(store, capsys):
    root = str(store.root_dir)
    with store.consumer("events", group="readers") as consumer:
        consumer.poll_many(20)
        consumer.commit()
    ends = store.end_offsets("events")
    base = ["--root", root, "groups", "reset", "events", "readers"]
    assert run(capsys, *base, "--to-start")[0] == 0
    live = store.consumer("events", group="readers")
    assert live.committed() == {0: 0, 1: 0}
    code, _, err = run(capsys, *base, "--to-end")
    assert code == 1 and "live members" in err and live.member_id in err
    live.close()
    code, out, _ = run(capsys, *base, "--to-offset", "1", "--partition", "1")
    assert code == 0 and "1:1" in out
    code, out, _ = run(capsys, *base, "--to-time", "2000-01-01T00:00:00Z")
    assert code == 0 and "0:0, 1:0" in out
    code, out, _ = run(capsys, *base, "--to-end")
    assert code == 0 and f"0:{ends[0]}, 1:{ends[1]}" in out


def test_errors_are_one_line_naming_the_value(store, capsys):
    root = str(store.root_dir)
    code, _, err = run(capsys, "--root", root, "groups", "describe", "events", "nobody")
    assert code == 1 and "'nobody'" in err and "Traceback" not in err
    code, _, err = run(capsys, "--root", root, "groups", "describe", "missing", "g")
    assert code == 1 and "missing" in err
    with store.consumer("events", group="g"):
        pass
    base = ["--root", root, "groups", "reset", "events", "g"]
    code, _, err = run(capsys, *base, "--to-offset", "999")
    assert code == 1 and "999" in err
    code, _, err = run(capsys, *base, "--to-time", "yesterday")
    assert code == 1 and "'yesterday'" in err
    code, _, err = run(capsys, *base, "--to-start", "--partition", "7")
    assert code == 1 and "--partition 7" in err
