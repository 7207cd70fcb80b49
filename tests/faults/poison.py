"""A handler with a bug for the poison-message cases (tests/faults/test_poison.py).

``mq-bridge run ... --handler tests.faults.poison:buggy``: every message whose number is a
poison number (n % 97 == 13) fails with a `KeyError` (a bug, not a decision) until the file
named by ``$FAULTS_FIXED`` exists: the fix, deployed.
"""

from __future__ import annotations

import os

from mq_bridge import Message


def is_poison(number: int) -> bool:
    return number % 97 == 13


def buggy(message: Message) -> Message:
    number = int(message.payload)
    if is_poison(number) and not os.path.exists(os.environ["FAULTS_FIXED"]):
        return {}["total"]  # KeyError: the bug
    return message
