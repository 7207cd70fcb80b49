"""A member killed with kill -9 in the middle of consumption: nothing is lost."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.twainmq.groups.ownership_log import check_log, missing_messages
from twainmq import Twain

WORKER = Path(__file__).with_name("group_worker.py")
COMMIT_EVERY = 25


def start_worker(
    root: Path, log: Path, lifetime: float = 0, session_timeout: float = 10.0
) -> subprocess.Popen:
    command = [sys.executable, str(WORKER), str(root), "events", "workers", str(log)]
    settings = [str(lifetime), str(COMMIT_EVERY), str(session_timeout)]
    return subprocess.Popen([*command, *settings], stdout=subprocess.PIPE)


def stop_and_kill(process: subprocess.Popen, log: Path) -> None:
    """Freeze the process, note it in the log, then kill -9 it (see ownership_log)."""
    os.kill(process.pid, signal.SIGSTOP)  # a process that already exited is a zombie: no error
    _, status = os.waitpid(process.pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        process.returncode = os.waitstatus_to_exitcode(status)  # it left on its own meanwhile
        return
    with open(log, "a") as file:
        file.write(f"K {process.pid}\n")
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def both_own_partitions_and_read(tmq, log, first, second, at_least: int) -> None:  # type: ignore[no-untyped-def]
    """Wait until both workers own partitions, then feed them until both have read."""
    assert wait_until(
        lambda: lines_of(log, first.pid, "A") > 0 and lines_of(log, second.pid, "A") > 0, 60
    )
    written = 0
    while lines_of(log, first.pid) < at_least or lines_of(log, second.pid) == 0:
        assert written < 100_000, "the workers do not read"
        with tmq.producer("events") as producer:
            for key in range(200):
                producer.write_message(key, f"feed{written + key}")
        written += 200
        time.sleep(0.05)


def lines_of(log: Path, pid: int, kind: str = "M") -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if line.startswith(f"{kind} {pid} "))


@pytest.mark.slow
def test_kill_9_mid_consumption_loses_nothing(tmp_path):
    root, log = tmp_path / "store", tmp_path / "events.log"
    tmq = Twain(root)
    tmq.create_topic("events", partitions=4)
    with tmq.producer("events") as producer:
        for i in range(2000):
            producer.write_message(i, f"m{i}")
    victim = start_worker(root, log)
    survivor = start_worker(root, log)
    try:
        both_own_partitions_and_read(tmq, log, victim, survivor, at_least=300)
        stop_and_kill(victim, log)
        with tmq.producer("events") as producer:
            for i in range(2000, 3000):
                producer.write_message(i, f"m{i}")
        ends = tmq.end_offsets("events")
        assert wait_until(lambda: not missing_messages(check_log(log), ends), 60, step=0.05)
    finally:
        for process in (victim, survivor):
            process.kill()
            process.wait()
    check = check_log(log)
    assert check.violations == []
    assert missing_messages(check, ends) == []
    for (partition, offset), readers in check.processed.items():
        if len(readers) > 1:  # a duplicate must come from the victim's uncommitted window
            assert victim.pid in readers, (partition, offset, readers)
            committed = check.last_commit.get((victim.pid, partition), 0)
            assert offset >= committed, (partition, offset, committed)


@pytest.mark.slow
def test_a_hung_member_is_expelled_and_cannot_read_or_commit_what_it_lost(tmp_path):
    root, log = tmp_path / "store", tmp_path / "events.log"
    tmq = Twain(root)
    tmq.create_topic("events", partitions=4)
    with tmq.producer("events") as producer:
        for i in range(1000):
            producer.write_message(i, f"m{i}")
    # Short enough for a quick test, long enough that a busy machine does not starve
    # a healthy member into expulsion.
    hung = start_worker(root, log, session_timeout=2.0)
    healthy = start_worker(root, log, session_timeout=2.0)
    try:
        both_own_partitions_and_read(tmq, log, hung, healthy, at_least=1)
        os.kill(hung.pid, signal.SIGSTOP)
        os.waitpid(hung.pid, os.WUNTRACED)
        with open(log, "a") as file:
            file.write(f"X {hung.pid}\n")  # frozen: it reads nothing until SIGCONT
        assert wait_until(lambda: set(check_log(log).holders.values()) == {healthy.pid}, 60)
        assert wait_until(lambda: len(check_log(log).holders) == 4, 60)
        os.kill(hung.pid, signal.SIGCONT)
        with tmq.producer("events") as producer:
            for i in range(1000, 2000):
                producer.write_message(i, f"m{i}")
        ends = tmq.end_offsets("events")
        assert wait_until(lambda: not missing_messages(check_log(log), ends), 60, step=0.05)
        # it woke up, found itself expelled, and joined again as a new member
        assert wait_until(lambda: lines_of(log, hung.pid, "A") > lines_before_x(log, hung.pid), 60)
    finally:
        for process in (hung, healthy):
            process.kill()
            process.wait()
    check = check_log(log)
    assert check.violations == []
    assert missing_messages(check, ends) == []


def lines_before_x(log: Path, pid: int) -> int:
    lines = log.read_text().splitlines()
    cut = lines.index(f"X {pid}")
    return sum(1 for line in lines[:cut] if line.startswith(f"A {pid} "))
