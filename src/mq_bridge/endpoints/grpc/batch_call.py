"""One ``PublishBatch`` stream driven entirely on the caller's thread.

grpcio's public stream-stream call needs three threads per message: a thread writing the
request iterator waits for each send, the caller waits for each answer, and the channel's
spin thread hands every completion from one to the other. On a loaded 2-core machine
those hand-overs, not the bytes, bound a batch (~2.5k messages/s on loopback). This module
uses grpcio's own single-threaded call, the one behind its `SingleThreadedUnaryStream`
option (``Channel.segregated_call``: a completion queue of the call's own that the caller
polls), so one send and one receive are always outstanding and the caller's thread picks
up each completion itself::

    caller ─ send 1 ─┐ send 2 ─┐ ...  send n ─┐ close
            recv 1 ──┘  recv 2 ──┘ ...          └ recv ... until the status arrives

Nothing on the wire changes. It is grpcio's internal (``grpc._cython.cygrpc``) API, stable
since 1.2x but not public: `supported` says whether this grpcio has it, and the output falls
back to the public call when not.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

__all__ = ["BatchOutcome", "publish_batch", "supported"]

_SEND, _CLOSE, _RECEIVE, _STATUS, _INITIAL = "send", "close", "receive", "status", "initial"


class BatchOutcome:
    """The answers the server streamed back (serialized), and how the call ended."""

    __slots__ = ("answers", "code", "details")

    def __init__(self, answers: list[bytes], code: Any, details: str) -> None:
        self.answers = answers
        self.code = code  # a grpc.StatusCode; None when the status never came
        self.details = details


def supported(channel: Any) -> bool:
    """Whether `channel` (a grpcio channel) offers the single-threaded call."""
    try:
        from grpc import _common
        from grpc._cython import cygrpc
    except ImportError:
        return False
    inner = getattr(channel, "_channel", None)
    return (
        hasattr(inner, "segregated_call")
        and hasattr(cygrpc, "SegregatedCall")
        and hasattr(_common, "CYGRPC_STATUS_CODE_TO_STATUS_CODE")
    )


def publish_batch(
    channel: Any, method: bytes, requests: Sequence[bytes], timeout: float
) -> BatchOutcome:
    """Stream `requests` (serialized ``BridgeMessage``s) to `method` and read the answers
    until the server ends the call (or `timeout` s pass: DEADLINE_EXCEEDED)."""
    from grpc import _common
    from grpc._cython import cygrpc

    first = (
        (cygrpc.SendInitialMetadataOperation((), 0), cygrpc.ReceiveStatusOnClientOperation(0)),
        _STATUS,
    )
    call = channel._channel.segregated_call(
        cygrpc.PropagationConstants.GRPC_PROPAGATE_DEFAULTS,
        method,
        None,
        time.time() + timeout,
        (),
        None,
        (first, ((cygrpc.ReceiveInitialMetadataOperation(0),), _INITIAL)),
        cygrpc.build_census_context(),
        None,
    )
    outstanding = {_STATUS, _INITIAL}
    answers: list[bytes] = []
    status: Any = None
    details = ""
    sent = 0

    def operate(operation: Any, tag: str) -> None:
        call.operate((operation,), tag)
        outstanding.add(tag)

    try:
        if requests:
            operate(cygrpc.SendMessageOperation(requests[0], 0), _SEND)
            sent = 1
        else:
            operate(cygrpc.SendCloseFromClientOperation(0), _CLOSE)
        operate(cygrpc.ReceiveMessageOperation(0), _RECEIVE)
        while outstanding:
            event = call.next_event()
            tag = event.tag
            outstanding.discard(tag)
            if tag == _STATUS:
                for operation in event.batch_operations:
                    if operation.type() == cygrpc.OperationType.receive_status_on_client:
                        status = operation.code()
                        details = operation.details() or ""
            elif tag == _RECEIVE:
                message = event.batch_operations[0].message()
                if message is not None:
                    answers.append(message)
                    if status is None:  # once the call is over, nothing more is posted
                        operate(cygrpc.ReceiveMessageOperation(0), _RECEIVE)
            elif tag == _SEND and event.success and status is None:
                if sent < len(requests):
                    operate(cygrpc.SendMessageOperation(requests[sent], 0), _SEND)
                    sent += 1
                else:
                    operate(cygrpc.SendCloseFromClientOperation(0), _CLOSE)
    except BaseException:
        if outstanding:
            call.cancel(cygrpc.StatusCode.cancelled, "the caller gave up")
            while outstanding:  # each outstanding operation completes once cancelled
                outstanding.discard(call.next_event().tag)
        raise
    code = None if status is None else _common.CYGRPC_STATUS_CODE_TO_STATUS_CODE.get(status)
    return BatchOutcome(answers, code, details)
