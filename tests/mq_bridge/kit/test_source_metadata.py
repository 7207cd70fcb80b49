"""The ``mqb.src.*`` rules: opt-in source cursors, forged keys dropped, outputs stripped."""

from __future__ import annotations

import pytest

from mq_bridge.endpoints.kit.source_metadata import (
    SOURCE_PREFIX,
    drop_source_keys,
    source_metadata_enabled,
    with_source,
)


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "Yes", " yes "])
def test_enabled_by_1_true_or_yes(value: str) -> None:
    assert source_metadata_enabled({"MQB_SOURCE_METADATA": value})


@pytest.mark.parametrize("value", ["", "0", "false", "no", "on", "2"])
def test_disabled_otherwise(value: str) -> None:
    assert not source_metadata_enabled({"MQB_SOURCE_METADATA": value})


def test_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not source_metadata_enabled({})
    monkeypatch.delenv("MQB_SOURCE_METADATA", raising=False)
    assert not source_metadata_enabled()
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    assert source_metadata_enabled()


def test_drop_returns_the_same_dict_when_there_is_nothing_to_drop() -> None:
    metadata = {"kind": "order", "mqb.srcx": "not ours"}
    assert drop_source_keys(metadata) is metadata
    empty: dict[str, str] = {}
    assert drop_source_keys(empty) is empty


def test_drop_removes_source_keys_without_changing_the_input() -> None:
    metadata = {"kind": "order", "mqb.src.kafka_offset": "9", "mqb.src.nats_subject": "s"}
    assert drop_source_keys(metadata) == {"kind": "order"}
    assert len(metadata) == 3


def test_with_source_adds_the_fields_only_when_enabled() -> None:
    fields = {"nats_subject": "orders", "nats_stream_sequence": 17}
    assert with_source({"kind": "order"}, fields, enabled=True) == {
        "kind": "order",
        "mqb.src.nats_subject": "orders",
        "mqb.src.nats_stream_sequence": "17",
    }
    metadata = {"kind": "order"}
    assert with_source(metadata, fields, enabled=False) is metadata


def test_with_source_drops_forged_keys_enabled_or_not() -> None:
    forged = {"kind": "order", "mqb.src.kafka_offset": "0", "mqb.src.kafka_topic": "fake"}
    assert with_source(forged, {"kafka_topic": "t"}, enabled=False) == {"kind": "order"}
    assert with_source(forged, {"kafka_topic": "t", "kafka_offset": 5}, enabled=True) == {
        "kind": "order",
        "mqb.src.kafka_topic": "t",
        "mqb.src.kafka_offset": "5",
    }


def test_with_source_leaves_out_none_values() -> None:
    # core NATS has no stream sequence
    result = with_source({}, {"nats_subject": "s", "nats_stream_sequence": None}, enabled=True)
    assert result == {"mqb.src.nats_subject": "s"}
    assert all(key.startswith(SOURCE_PREFIX) for key in result)
