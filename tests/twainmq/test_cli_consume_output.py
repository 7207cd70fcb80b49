"""What ``twainmq consume`` prints for each kind of payload: text as text, binary as hex."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

from mq_bridge import Message, Publisher
from twainmq import Twain
from twainmq.cli import main, render

ORDER = {"order_id": 1, "quantity": 2, "unit_price_cents": 450}


def consume(capsys: pytest.CaptureFixture[str], root: Path, *options: str) -> list[str]:
    assert main(["--root", str(root), "consume", "t", *options]) == 0
    return capsys.readouterr().out.splitlines()


def bodies(capsys: pytest.CaptureFixture[str], root: Path) -> list[str]:
    return [line.split("\t", 3)[3] for line in consume(capsys, root)]


def messages(capsys: pytest.CaptureFixture[str], root: Path) -> list[object]:
    return [json.loads(line)["message"] for line in consume(capsys, root, "--json")]


def store_with(root: Path, *payloads: object) -> None:
    tmq = Twain(str(root))
    tmq.create_topic("t", partitions=1)
    with tmq.producer("t") as producer:
        for payload in payloads:
            producer.write_message(1, payload)


def test_a_utf8_payload_prints_as_text_and_json_as_json(tmp_path, capsys):
    order = json.dumps(ORDER).encode()
    store_with(tmp_path, order, "a str", "café au lait".encode())
    assert bodies(capsys, tmp_path) == [order.decode(), "a str", "café au lait"]
    assert messages(capsys, tmp_path) == [{"json": ORDER}, "a str", {"text": "café au lait"}]


def test_binary_data_is_still_shown_in_hex(tmp_path, capsys):
    number = (12345).to_bytes(16, "big")  # the seed's bytes sample
    store_with(tmp_path, number, bytes(range(256)))
    assert bodies(capsys, tmp_path) == [
        f"<16 bytes> {number.hex()}",
        f"<256 bytes> {bytes(range(32)).hex()}…",
    ]
    assert messages(capsys, tmp_path) == [
        {"bytes": number.hex()},
        {"bytes": bytes(range(256)).hex()},
    ]


def test_control_characters_and_bytes_that_are_not_utf8_are_escaped_on_one_line(tmp_path, capsys):
    store_with(tmp_path, b"first line\nsecond\tline\r\x00 and \xff\xfe", "x")
    assert bodies(capsys, tmp_path) == ["first line\\nsecond\tline\\r\\x00 and \\xff\\xfe", "x"]
    [shown, _] = messages(capsys, tmp_path)
    assert shown == {"bytes": b"first line\nsecond\tline\r\x00 and \xff\xfe".hex(),
                     "text": "first line\\nsecond\tline\\r\\x00 and \\xff\\xfe"}  # fmt: skip


def test_an_order_sent_through_mq_bridge_shows_its_json(tmp_path, capsys):
    """The README's `mq-bridge send ... --json` into a twain topic: the record is the bridge's
    envelope (binary header, JSON metadata, payload); its JSON is readable, the header escaped."""
    config = {"twain": {"root": str(tmp_path), "topic": "t", "create": {"partitions": 1}}}
    with Publisher.from_config(config) as publisher:
        publisher.send(Message.from_json(ORDER, {"kind": "order.created"}))
    [body] = bodies(capsys, tmp_path)
    assert body.startswith("MQB1")
    assert body.endswith(
        '{"kind":"order.created"}{"order_id":1,"quantity":2,"unit_price_cents":450}'
    )
    assert "bytes>" not in body
    [shown] = messages(capsys, tmp_path)
    assert isinstance(shown, dict) and shown["text"] == body
    assert bytes.fromhex(shown["bytes"]).endswith(b'"unit_price_cents":450}')


def test_the_examples_in_the_renderer_run():
    failures, tried = doctest.testmod(render)
    assert (failures, tried > 0) == (0, True)
