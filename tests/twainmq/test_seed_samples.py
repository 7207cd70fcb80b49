"""The getting-started guide's samples (the seed) run unchanged.

The samples come from `tests.seed_samples` (kept verbatim; ``tests/test_seed_samples.py``
checks them against the seed); they run in order in one namespace, as a
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
from tests.seed_samples import CREATE_STORE, CREATE_TOPIC, DATACLASSES, PRODUCE


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
