"""Acks and nacks of one consuming channel, in any order, with as few frames as possible.

A channel numbers its deliveries 1, 2, 3, ...; a batch is a run of consecutive tags
(`Span`). Settlement keeps a floor: every tag below it is settled. A span that starts at
the floor is settled with one frame (``multiple=true`` at its last tag), since nothing
below it is outstanding; a span settled out of order is settled tag by tag, and the floor
later steps over it::

    floor=1   ack [1..500]        -> basic.ack(500, multiple)        floor=501
              ack [1001..1500]    -> basic.ack(1001..1500, one each)  floor=501
              ack [501..1000]     -> basic.ack(1000, multiple)        floor=1501

Runs on the connection's I/O thread only. A span of an older channel (`epoch`) is
dropped: its deliveries died with that channel and the broker redelivers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Settlement", "Span"]


@dataclass(frozen=True, slots=True)
class Span:
    """The delivery tags ``first..last`` of one channel incarnation (`epoch`)."""

    epoch: int
    first: int
    last: int


class Settlement:
    """The settled tags of one channel (see the module docstring)."""

    def __init__(self, pika_channel: Any, epoch: int) -> None:
        self._channel = pika_channel
        self._epoch = epoch
        self._floor = 1
        self._settled: set[int] = set()  # settled tags above the floor

    def settle(self, spans: list[Span], requeue: bool | None) -> None:
        """Ack (`requeue` None) or nack with requeue each span, in the given order."""
        channel = self._channel
        if not channel.is_open:
            return
        for span in spans:
            if span.epoch != self._epoch:
                continue
            if span.first == self._floor:
                self._send(span.last, True, requeue)
                self._floor = span.last + 1
                self._step_floor()
            else:
                for tag in range(span.first, span.last + 1):
                    self._send(tag, False, requeue)
                    self._settled.add(tag)

    def _step_floor(self) -> None:
        settled, floor = self._settled, self._floor
        while floor in settled:
            settled.discard(floor)
            floor += 1
        self._floor = floor

    def _send(self, tag: int, multiple: bool, requeue: bool | None) -> None:
        if requeue is None:
            self._channel.basic_ack(tag, multiple)
        else:
            self._channel.basic_nack(tag, multiple, requeue)
