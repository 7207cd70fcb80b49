"""The getting-started guide's samples (the seed) run unchanged.

Each sample is copied verbatim from the guide; they run in order in one namespace, as a
reader following the guide would. The guide's root "/tmp/twain" is redirected to a temporary
directory by the fixture (the sample text itself is not touched). The consumer-group sample
belongs to the consumer-group tests.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

import twainmq

CREATE_STORE = """\
from twainmq import Twain

mq = Twain("/tmp/twain")
"""

CREATE_TOPIC = """\
tmq = Twain("/tmp/twain")

tmq.create_topic("events", key_type="u16", partitions=4)
"""

PRODUCE = """\
producer = tmq.producer("events")

producer.write_message(12, "Hello world")

x = 12345
producer.write_message(42, x.to_bytes(16))
"""

DATACLASSES = """\
from dataclasses import dataclass

@dataclass
class Event:
    id: int
    text: str

tmq.register_msg_cls(Event)

producer = tmq.producer("events")
producer.write_message(7, Event(id=1, text="hello"))
"""


@pytest.fixture
def redirected_twain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make ``Twain("/tmp/twain")`` open a directory under ``tmp_path`` instead."""
    real = twainmq.Twain
    root = tmp_path / "twain"

    class GuideTwain(real):  # type: ignore[misc, valid-type]
        def __init__(self, path: str) -> None:
            assert path == "/tmp/twain"
            super().__init__(root)

    monkeypatch.setattr(twainmq, "Twain", GuideTwain)
    return root


def test_guide_samples_run_unchanged(
    redirected_twain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("guide_samples")  # dataclasses need a real module
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for sample in (CREATE_STORE, CREATE_TOPIC, PRODUCE, DATACLASSES):
        exec(compile(sample, "<guide>", "exec"), namespace)
    store = twainmq.Twain("/tmp/twain")
    store.register_msg_cls(namespace["Event"])  # type: ignore[arg-type]
    received = {m.key: m.message for m in store.consumer("events")}
    assert received[12] == "Hello world"
    assert received[42] == (12345).to_bytes(16, "big")
    assert received[7] == namespace["Event"](id=1, text="hello")  # type: ignore[operator]
    assert (redirected_twain / "events.twc").is_file()
