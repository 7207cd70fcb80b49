"""A writer process for the multi-process and crash tests.

    python writer_process.py ROOT TOPIC WRITER_ID COUNT FSYNC ACK_FILE

Writes COUNT messages "WRITER_ID:SEQ" (key SEQ % 65536); single writes and small batches
alternate. After each call returns it appends "SEQ PARTITION OFFSET" lines to ACK_FILE with
an unbuffered write, so an ack exists only for writes that returned.
"""

from __future__ import annotations

import os
import sys

from twainmq import Twain


def main() -> None:
    root, topic, writer, count, fsync, ack_path = sys.argv[1:7]
    producer = Twain(root).producer(topic, fsync=fsync)
    acks = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    seq = 0
    while seq < int(count):
        if seq % 10 == 0:
            batch = [(s % 65536, f"{writer}:{s}") for s in range(seq, min(seq + 5, int(count)))]
            landed = producer.write_messages(batch)
            lines = [f"{seq + i} - -\n" for i in range(len(batch))]
            assert sum(len(r) for runs in landed.values() for r in runs) == len(batch)
            seq += len(batch)
        else:
            partition, offset = producer.write_message(seq % 65536, f"{writer}:{seq}")
            lines = [f"{seq} {partition} {offset}\n"]
            seq += 1
        os.write(acks, "".join(lines).encode())
    producer.close()


if __name__ == "__main__":
    main()
