"""Shared test configuration."""

# The real-broker fixtures (kafka_bootstrap, nats_url, ...) and helpers, for every test.
pytest_plugins = ["tests.brokers"]
