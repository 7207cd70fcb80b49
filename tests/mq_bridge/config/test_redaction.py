"""redact(): secrets never reach logs or reprs."""

from __future__ import annotations

import pytest

from mq_bridge.config import redact
from mq_bridge.config.redaction import is_secret_key, redact_text


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "db_password",
        "secret",
        "client_secret",
        "token",
        "session_token",
        "api_key",
        "apiKey",
        "access_key",
        "secret_key",
        "key",
        "sasl_password",
        "sasl_username",
        "credentials",
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key", ["topic", "metadata_key", "partition_key", "routing_key", "keys", "username", "url", 3]
)
def test_plain_keys(key: object) -> None:
    assert not is_secret_key(key)


def test_redacts_secret_values_and_url_passwords_in_a_copy() -> None:
    config = {
        "kafka": {
            "brokers": "b:9092",
            "sasl_password": "hunter2",
            "password": None,
            "urls": ["amqp://guest:guest@localhost:5672/vhost", "nats://localhost:4222"],
        },
        "middlewares": [{"dlq": {"endpoint": {"http": {"token": {"nested": "x"}}}}}],
    }
    redacted = redact(config)
    assert redacted == {
        "kafka": {
            "brokers": "b:9092",
            "sasl_password": "***",
            "password": None,
            "urls": ["amqp://guest:***@localhost:5672/vhost", "nats://localhost:4222"],
        },
        "middlewares": [{"dlq": {"endpoint": {"http": {"token": "***"}}}}],
    }
    assert config["kafka"]["sasl_password"] == "hunter2"  # the input is untouched


def test_redact_text() -> None:
    assert redact_text("connect postgresql://app:s3cr3t@db:5432/x failed") == (
        "connect postgresql://app:***@db:5432/x failed"
    )
    assert redact_text("http://user@host/") == "http://user@host/"
