"""`sending`: how the contract suite sends to a case, whatever its send waits for.

A send to a broker returns once the broker has the message. A live endpoint whose input
answers each message with its outcome (`ContractCase.settles_sends`: grpc, http without
`fire_and_forget`) returns only once the test received and settled it, so there the sends
run on a thread while the test receives::

    with sending(case, lambda: output.send(sample(3)), output.flush):
        batches = receive_n(source, 3, ack=True)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.mq_bridge.contract.cases import ContractCase


class Sends:
    """What `sending` made of its calls: the error they ended with, if any."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        #: set by a test for which the send's outcome is not the point
        self.may_fail = False


@contextmanager
def sending(case: ContractCase, *calls: Callable[[], object]) -> Iterator[Sends]:
    """Make `calls` (sends, flush, close) in order: at once, or, for a case whose sends
    return only once the input settled them, on a thread that the block's end joins. An
    error is raised unless the block set `may_fail` (then it is in `errors`)."""
    sends = Sends()

    def run() -> None:
        try:
            for call in calls:
                call()
        except BaseException as error:  # handed to the test
            sends.errors.append(error)

    if not case.settles_sends:
        run()
        if sends.errors:
            raise sends.errors[0]
        yield sends
        return
    sender = threading.Thread(target=run, daemon=True)
    sender.start()
    try:
        yield sends
    finally:
        sender.join(30)
    assert not sender.is_alive(), "a send is still waiting for its outcome"
    if sends.errors and not sends.may_fail:
        raise sends.errors[0]
