"""`require_driver`: optional client libraries, and the error naming the extra to install."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.errors import ConfigError


def test_an_installed_module_is_returned() -> None:
    assert require_driver("json", endpoint="file", extra="file") is json


def test_a_missing_driver_names_the_package_and_the_extra() -> None:
    with pytest.raises(ConfigError) as caught:
        require_driver(
            "mq_bridge_kit_no_such_driver", endpoint="nats", extra="nats", package="nats-py"
        )
    assert str(caught.value) == (
        "the nats endpoint needs the nats-py package: pip install 'twainmq[nats]'"
    )
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)


def test_the_package_defaults_to_the_module_and_submodules_count_as_missing() -> None:
    with pytest.raises(ConfigError, match=r"needs the aio_nothing package: .*'twainmq\[amqp\]'"):
        require_driver("aio_nothing.client", endpoint="amqp", extra="amqp")


def test_a_driver_that_fails_to_import_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kit_broken_driver.py").write_text("import kit_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        require_driver("kit_broken_driver", endpoint="redis", extra="redis", package="redis")
    message = str(caught.value)
    assert "could not import the redis package" in message
    assert "kit_missing_dependency" in message
    assert "pip install 'twainmq[redis]'" in message
