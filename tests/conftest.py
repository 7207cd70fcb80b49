"""Shared test configuration."""

from hypothesis import settings

# The real-broker fixtures (kafka_bootstrap, nats_url, ...) and helpers, for every test.
pytest_plugins = ["tests.brokers"]

# Property tests check properties, not speed: on a loaded 2-core machine Hypothesis's default
# 200 ms deadline per example fails them for reasons that have nothing to do with the code.
settings.register_profile("project", deadline=None)
settings.load_profile("project")
