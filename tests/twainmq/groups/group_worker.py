"""A group consumer in its own process, for crash and stress tests.

Usage: python group_worker.py ROOT TOPIC GROUP LOG LIFETIME COMMIT_EVERY [SESSION_TIMEOUT]

Appends one line per event to the shared LOG (O_APPEND, one write per line, so
lines from all processes interleave in the order they happened):
  A <pid> <partition>             after taking a partition (on_assign)
  R <pid> <partition>             before giving it up (on_revoke)
  M <pid> <partition> <offset>    a message processed (before its commit)
  C <pid> <partition> <offset>    after a commit returned (offset = next to read)
  F <pid>                         a commit was refused: this member had been expelled
  J <pid>                         the process joined again as a new member (after expulsion)
It commits every COMMIT_EVERY messages and in on_revoke, and leaves after
LIFETIME seconds (0 = never).
"""

import os
import sys
import time

from twainmq import Twain
from twainmq.groups import CommitFencedError


def main() -> None:
    root, topic, group, log_path = sys.argv[1:5]
    lifetime, commit_every = float(sys.argv[5]), int(sys.argv[6])
    session_timeout = float(sys.argv[7]) if len(sys.argv) > 7 else 10.0
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pid = os.getpid()

    def emit(line: str) -> None:
        os.write(log, f"{line}\n".encode())

    consumer = None
    member_ids: list[str] = []

    def on_assign(partitions: list[int]) -> None:
        if consumer is not None and consumer.member_id != member_ids[-1]:
            member_ids.append(consumer.member_id)
            emit(f"J {pid}")
        for p in partitions:
            emit(f"A {pid} {p}")

    def on_revoke(partitions: list[int]) -> None:
        assert consumer is not None
        commit(consumer)
        for p in partitions:
            emit(f"R {pid} {p}")

    def commit(c) -> None:  # type: ignore[no-untyped-def]
        try:
            c.commit()
        except CommitFencedError:  # expelled while frozen: the new owner's commits rule
            emit(f"F {pid}")
            return
        for p in c.assignment():
            emit(f"C {pid} {p} {c.position(p)}")

    tmq = Twain(root)
    consumer = tmq.consumer(
        topic,
        group=group,
        on_assign=on_assign,
        on_revoke=on_revoke,
        session_timeout=session_timeout,
    )
    member_ids.append(consumer.member_id)
    print("joined", flush=True)
    deadline = time.monotonic() + lifetime if lifetime > 0 else float("inf")
    processed = 0
    while time.monotonic() < deadline:
        message = consumer.poll(timeout=0.05)
        if message is None:
            continue
        emit(f"M {pid} {message.partition} {message.offset}")
        processed += 1
        if processed % commit_every == 0:
            commit(consumer)
    consumer.close()


if __name__ == "__main__":
    main()
