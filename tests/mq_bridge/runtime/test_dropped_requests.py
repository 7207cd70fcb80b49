"""A request the route drops (a failure that is not retried) fails its requester at once."""

from __future__ import annotations

import pytest

from mq_bridge import NonRetryableError, Publisher, Route
from mq_bridge.errors import EndpointError
from tests.mq_bridge.helpers import unique


def test_a_requester_learns_that_the_route_dropped_its_request():
    topic = unique("requests")

    def refuse(message):
        raise NonRetryableError("no such order")

    route = Route.from_config({"input": {"memory": {"topic": topic}}, "output": {"response": {}}})
    requester = {"memory": {"topic": topic, "request_reply": True, "request_timeout_ms": 600_000}}
    publisher = Publisher.from_config(requester)
    expected = pytest.raises(EndpointError, match="dropped it: NonRetryableError")
    with route.with_handler(refuse), publisher, expected:
        publisher.request(b"order 7")  # not a RequestTimeoutError ten minutes later
