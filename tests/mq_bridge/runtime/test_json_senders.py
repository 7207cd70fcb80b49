"""`Publisher.send_json` and every endpoint's fast `json_sender` fail as
``send_one(Message.from_json(data, metadata, id))`` does: same exception type, same message.

They share one prologue (`mq_bridge.message.json_send_parts`); this pins that the prologue
checks what `Message` checks, in `Message`'s order, and that no fast sender goes around it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mq_bridge import Message, Publisher
from mq_bridge.endpoints.base import OutputEndpoint
from mq_bridge.runtime.factory import build_output, new_context

ENDPOINTS = Path(__file__).parents[3] / "src" / "mq_bridge" / "endpoints"

#: (data, metadata, id): each is refused by `Message.from_json`.
BAD_VALUES = {
    "metadata value not str": ({"n": 1}, {"k": 1}, None),
    "metadata key not str": ({"n": 1}, {1: "v"}, None),
    "value not serialisable": ({"when": object()}, None, None),
    "set not serialisable": ({"s": {1, 2}}, {"k": "v"}, "id"),
    "id of a wrong type": ({"n": 1}, None, 1.5),
    "id a bool": ({"n": 1}, None, True),
    "id beyond 128 bits": ({"n": 1}, None, 1 << 128),
    "negative id": ({"n": 1}, None, -1),
    "payload checked before metadata": ({"when": object()}, {"k": 1}, 1.5),
    "metadata checked before id": ({"n": 1}, {"k": 1}, 1.5),
}

Sender = Callable[[Any, Any, Any], None]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def file_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    path: Path = request.getfixturevalue("tmp_path") / "out.log"
    return {"file": {"path": str(path)}}


def redis_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    url = request.getfixturevalue("redis_url")
    return {"redis_streams": {"url": url, "stream": unique("json-senders")}}


def mqtt_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    address = request.getfixturevalue("mqtt_address")
    name = unique("json-senders")
    return {"mqtt": {"url": f"tcp://{address}", "topic": f"t/{name}", "client_id": name}}


def kafka_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    topic = unique("json-senders")

    def delete() -> None:
        from tests.mq_bridge.endpoints.test_kafka import delete_topic

        delete_topic(bootstrap, topic)

    request.addfinalizer(delete)
    return {"kafka": {"url": bootstrap, "topic": topic}}


#: Every endpoint package with a `json_sender`, and how to configure its output.
FAST_SENDERS = {
    "file": file_config,
    "redis": redis_config,
    "mqtt": mqtt_config,
    "kafka": kafka_config,
}


def test_every_fast_sender_is_covered_here() -> None:
    """A new `json_sender` must join `FAST_SENDERS`, so the promise is tested for it too."""
    defining = {
        path.parent.name
        for path in ENDPOINTS.glob("*/*.py")
        if re.search(r"def json_sender\(", path.read_text())
    }
    assert defining == set(FAST_SENDERS)


@pytest.fixture(
    params=[
        "publisher",
        "file",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("mqtt", marks=pytest.mark.mqtt),
        pytest.param("kafka", marks=pytest.mark.kafka),
    ]
)
def sender(request: pytest.FixtureRequest) -> Iterator[tuple[Sender, OutputEndpoint | None]]:
    """A `send_json`-shaped callable, and the output whose `send_one` it stands beside."""
    if request.param == "publisher":  # the prologue of its own, without a fast sender
        with Publisher.from_config({"memory": {"topic": unique("json-senders")}}) as publisher:
            yield publisher.send_json, None
        return
    output = build_output(FAST_SENDERS[request.param](request), new_context("test"))
    output.connect()
    try:
        fast = output.json_sender()
        assert fast is not None, f"{request.param} offers no json_sender with these options"
        yield fast, output
    finally:
        output.close()


def failure(call: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises(Exception) as caught:
        call()
    return caught.type, str(caught.value)


@pytest.mark.parametrize(("data", "metadata", "id"), BAD_VALUES.values(), ids=BAD_VALUES)
def test_a_bad_value_fails_as_send_one_of_message_from_json_would(
    sender: tuple[Sender, OutputEndpoint | None], data: Any, metadata: Any, id: Any
) -> None:
    send_json, output = sender
    send_one = output.send_one if output is not None else lambda message: None
    expected = failure(lambda: send_one(Message.from_json(data, metadata, id)))
    assert failure(lambda: send_json(data, metadata, id)) == expected
