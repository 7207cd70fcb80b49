"""The `aws` endpoint's configuration errors that need no server: region and credentials."""

from __future__ import annotations

import pytest

from mq_bridge import Publisher
from mq_bridge.errors import ConfigError


@pytest.fixture
def no_aws_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """No region and no credentials anywhere in the AWS configuration chain."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.usefixtures("no_aws_configuration")
def test_no_region_is_a_config_error_naming_the_option() -> None:
    with pytest.raises(ConfigError, match=r"aws\.region"):
        Publisher.from_config(
            {"aws": {"queue_url": "orders", "access_key": "a", "secret_key": "b"}}
        )


@pytest.mark.usefixtures("no_aws_configuration")
def test_no_credentials_is_a_config_error_naming_the_options() -> None:
    with pytest.raises(ConfigError, match=r"aws\.access_key"):
        Publisher.from_config({"aws": {"queue_url": "orders", "region": "eu-west-1"}})


@pytest.mark.usefixtures("no_aws_configuration")
def test_a_missing_profile_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(ConfigError, match="no-such-profile"):
        Publisher.from_config({"aws": {"queue_url": "orders", "region": "eu-west-1"}})
