"""OpenTelemetry: one trace follows a message through twain -> memory -> file routes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id

from mq_bridge import Publisher, Route
from mq_bridge.observability import disable_tracing, enable_tracing
from mq_bridge.observability.tracing import enabled
from tests.helpers import wait_until
from tests.mq_bridge.helpers import unique


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    enable_tracing(provider)
    try:
        yield provider, exporter
    finally:
        disable_tracing()


def _lines(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_a_trace_crosses_twain_memory_and_file_routes(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    store, middle, out = tmp_path / "store", unique("middle"), tmp_path / "out.jsonl"
    twain = {"twain": {"root": str(store), "topic": "orders", "create": {"partitions": 1}}}
    first_name, second_name = unique("from-twain"), unique("to-file")
    first = Route.from_config(
        {"routes": {first_name: {"input": twain, "output": {"memory": {"topic": middle}}}}},
        first_name,
    )
    second = Route.from_config(
        {
            "routes": {
                second_name: {
                    "input": {"memory": {"topic": middle}},
                    "output": {"file": {"path": str(out)}},
                }
            }
        },
        second_name,
    )
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("produce", kind=SpanKind.PRODUCER) as origin:
        context = origin.get_span_context()
        traceparent = f"00-{format_trace_id(context.trace_id)}-{format_span_id(context.span_id)}-01"
    with Publisher.from_config(twain) as publisher:
        publisher.send_json({"order": 1}, {"traceparent": traceparent})
        publisher.send_json({"order": 2})  # no trace yet: the first route starts one
    with first, second:
        assert wait_until(lambda: len(_lines(out)) == 2)
    lines = _lines(out)

    finished = [s for s in exporter.get_finished_spans() if s.name.endswith(" process")]
    assert len(finished) == 4  # a span per message per route
    by_route = {
        route: {s.attributes["messaging.message.id"]: s for s in finished
                if s.attributes["mq_bridge.route"] == route}
        for route in (first_name, second_name)
    }  # fmt: skip
    for line in lines:
        message_id = str(line["message_id"])
        hop1, hop2 = by_route[first_name][message_id], by_route[second_name][message_id]
        metadata = line["metadata"]
        assert isinstance(metadata, dict)
        trace_id = hop1.context.trace_id
        assert hop2.context.trace_id == trace_id  # one trace across both routes
        assert hop2.parent is not None and hop2.parent.span_id == hop1.context.span_id
        version, carried_trace, carried_parent, _flags = metadata["traceparent"].split("-")
        # carried on to the file: the last hop's span is the next one's parent
        assert (version, carried_trace) == ("00", format_trace_id(trace_id))
        assert carried_parent == format_span_id(hop2.context.span_id)
        assert hop1.kind is SpanKind.CONSUMER
        assert hop1.attributes["messaging.source.name"].startswith("twain:")
        assert hop2.attributes["messaging.destination.name"].startswith("file:")
        if json.loads(str(line["payload"]))["order"] == 1:
            assert trace_id == context.trace_id  # continues the producer's trace
            assert hop1.parent is not None and hop1.parent.span_id == context.span_id
        else:
            assert hop1.parent is None  # the first route started this trace


def test_tracing_is_off_by_default_and_leaves_metadata_alone(tmp_path: Path) -> None:
    assert not enabled()
    source, out = unique("in"), tmp_path / "out.jsonl"
    route = Route.from_config(
        {"input": {"memory": {"topic": source}}, "output": {"file": {"path": str(out)}}}
    )
    with route:
        Publisher.from_config({"memory": {"topic": source}}).send_json({"n": 1})
        assert wait_until(lambda: len(_lines(out)) == 1)
    assert "traceparent" not in _lines(out)[0].get("metadata", {})  # type: ignore[operator]
