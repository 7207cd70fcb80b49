"""ibmmq: the config validates; using it says exactly what is missing."""

from __future__ import annotations

import pytest

from mq_bridge import Consumer, Publisher
from mq_bridge.config.validation import validation_errors
from mq_bridge.errors import EndpointError

CONFIG = {"ibmmq": {"url": "mq.example(1414)", "queue_manager": "QM1", "channel": "DEV.APP",
                    "queue": "ORDERS", "password": "s3cret"}}  # fmt: skip


def test_a_peer_config_validates():
    assert validation_errors(CONFIG, "input") == []
    [missing] = validation_errors({"ibmmq": {"url": "h(1)", "channel": "C"}}, "output")
    assert "queue_manager" in missing.message


@pytest.mark.parametrize("build", [Publisher.from_config, Consumer.from_config])
def test_building_it_names_what_is_missing_without_the_password(build):
    with pytest.raises(EndpointError, match="libmqm_r") as raised:
        build(CONFIG)
    assert "QM1/ORDERS" in str(raised.value) and "s3cret" not in str(raised.value)
