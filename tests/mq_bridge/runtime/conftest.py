"""Fixtures shared by the runtime tests."""

from tests.mq_bridge.runtime.outage import outage  # noqa: F401 - a fixture
from tests.mq_bridge.runtime.scripted import scripted  # noqa: F401 - a fixture
