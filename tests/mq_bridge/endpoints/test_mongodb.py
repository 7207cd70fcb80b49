"""The `mongodb` endpoint against the MongoDB-protocol server (NX-27017 here).

Work-queue tests use ``id_format: hex``: NX-27017 cannot update or delete documents whose
`_id` is binary (mq-bridge's UUID layout, which a real MongoDB handles), so claims there
need text `_id`s. Each test uses collections of its own, dropped afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest

from mq_bridge import Message, Publisher, Route
from mq_bridge.config.declarations import parse_options
from mq_bridge.endpoints.base import InputEndpoint
from mq_bridge.endpoints.mongodb.claims import Claims
from mq_bridge.endpoints.mongodb.client import client_arguments
from mq_bridge.endpoints.mongodb.direct import DirectInserter, direct_eligible
from mq_bridge.endpoints.mongodb.options import MongoDbOptions
from mq_bridge.errors import ConfigError, EndpointUnavailableError, RequestTimeoutError
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.helpers import free_port
from tests.mq_bridge.helpers import open_input, open_output
from tests.tcp_proxy import TcpProxy, self_signed_context

pytestmark = pytest.mark.mongodb

DATABASE = "mq_bridge_test"


def drop_collection(url: str, name: str) -> None:
    """Drop `name` and what the endpoint may have made beside it."""
    with pymongo.MongoClient(url, serverSelectionTimeoutMS=5000) as client:
        for suffix in ("", "_replies", "_cursors"):
            client[DATABASE].drop_collection(name + suffix)


@pytest.fixture
def collection(mongodb_url: str) -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        drop_collection(mongodb_url, name)


def config(url: str, collection: str, **options: Any) -> dict[str, Any]:
    return {
        "mongodb": {
            "url": url,
            "database": DATABASE,
            "collection": collection,
            "id_format": "hex",
            **options,
        }
    }


def drain(source: InputEndpoint, count: int, timeout: float = 15.0) -> list[Message]:
    """Receive and ack until `count` messages arrived (or `timeout` passed)."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        batch = source.receive(count - len(got), 0.2)
        got += batch.messages
        if batch:
            source.ack(batch)
    return got


def documents(url: str, collection: str) -> list[dict[str, Any]]:
    with pymongo.MongoClient(url, serverSelectionTimeoutMS=5000) as client:
        return list(client[DATABASE][collection].find())


# --- output: what a returning send guarantees, the document layout ------------------------


def test_a_returning_send_has_the_document_stored_in_mq_bridges_layout(
    mongodb_url: str, collection: str
) -> None:
    output = open_output(config(mongodb_url, collection))
    message = Message(b"\x00binary\xff", {"kind": "order"})
    output.send_one(message)
    output.send([Message(b"a"), Message(b"b")])
    stored = documents(mongodb_url, collection)  # another client sees them at once
    assert len(stored) == 3
    first = next(d for d in stored if d["_id"] == f"{message.id_int:032x}")
    assert first["payload"] == b"\x00binary\xff"
    assert first["metadata"] == {"kind": "order"}
    assert first["locked_until"] is None and "created_at" in first
    output.close()


def test_uuid_ids_are_mq_bridges_bson_uuids(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection, id_format="uuid"))
    message = Message(b"x")
    output.send_one(message)
    (stored,) = documents(mongodb_url, collection)
    # Binary subtype 4 on a real MongoDB; NX-27017 hands the subtype back as 0.
    assert bytes(stored["_id"]) == message.id_int.to_bytes(16, "big")
    output.close()


def test_a_message_sent_twice_is_stored_once(mongodb_url: str, collection: str) -> None:
    """A resend after a lost acknowledgement: the duplicate `_id` counts as sent."""
    output = open_output(config(mongodb_url, collection))
    messages = [Message(b"m%d" % i) for i in range(3)]
    output.send(messages[:2])
    output.send(messages)
    output.send_one(messages[0])
    assert len(documents(mongodb_url, collection)) == 3
    output.close()


@pytest.mark.parametrize(
    ("storage_format", "payload", "stored_payload", "read_back"),
    [
        ("json", b'{"n": 1, "tags": ["a"]}', {"n": 1, "tags": ["a"]}, b'{"n":1,"tags":["a"]}'),
        ("json", b"not json", b"not json", b"not json"),
        ("text", "h\u00e9".encode(), "h\u00e9", "h\u00e9".encode()),
        ("text", b"\xff", b"\xff", b"\xff"),
        ("normal", b'{"n": 1}', b'{"n": 1}', b'{"n": 1}'),
    ],
)
def test_formats_store_the_payload_as_described_and_read_back(
    mongodb_url: str,
    collection: str,
    storage_format: str,
    payload: bytes,
    stored_payload: Any,
    read_back: bytes,
) -> None:
    cfg = config(mongodb_url, collection, format=storage_format)
    output, source = open_output(cfg), open_input(cfg)
    message = Message(payload, {"k": "v"})
    output.send_one(message)
    (stored,) = documents(mongodb_url, collection)
    assert stored["payload"] == stored_payload
    (got,) = drain(source, 1)
    assert (got.payload, got.metadata, got.id) == (read_back, {"k": "v"}, message.id)
    output.close()
    source.close()


def test_raw_format_writes_the_json_object_as_the_document(
    mongodb_url: str, collection: str
) -> None:
    cfg = config(mongodb_url, collection, format="raw")
    output, source = open_output(cfg), open_input(cfg)
    message = Message(b'{"type": "note", "n": 2}')
    output.send_one(message)
    (stored,) = documents(mongodb_url, collection)
    assert stored == {"_id": f"{message.id_int:032x}", "type": "note", "n": 2}
    (got,) = drain(source, 1)
    assert got.json() == {"type": "note", "n": 2} and got.id == message.id
    assert got.metadata == {"mq_bridge.original_format": "raw"}
    output.close()
    source.close()


def test_ttl_seconds_makes_a_ttl_index_on_created_at(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection, ttl_seconds=3600, request_reply=True))
    with pymongo.MongoClient(mongodb_url) as client:
        for name in (collection, f"{collection}_replies"):
            indexes = client[DATABASE][name].index_information().values()
            assert any(
                i["key"] == [("created_at", 1)] and i.get("expireAfterSeconds") == 3600
                for i in indexes
            )
    output.close()


def test_capped_size_bytes_creates_the_collection_capped(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection, capped_size_bytes=1 << 20))
    output.send_one(Message(b"x"))
    with pymongo.MongoClient(mongodb_url) as client:
        assert collection in client[DATABASE].list_collection_names()
        collection_options = client[DATABASE][collection].options()
    # A real MongoDB answers {"capped": True, "size": ...}; NX-27017 accepts the create
    # and reports no options (it has no capped collections), so only that much is checked.
    assert collection_options.get("capped", True) is True
    output.close()


# --- the work queue: competing consumers ------------------------------------------------


def test_two_competing_consumers_never_take_the_same_document(
    mongodb_url: str, collection: str
) -> None:
    cfg = config(mongodb_url, collection, shared=False)
    output = open_output(cfg)
    sent = [Message(b"%d" % i) for i in range(400)]
    for start in range(0, 400, 100):
        output.send(sent[start : start + 100])
    consumers = [open_input(cfg), open_input(cfg)]
    taken: list[list[Message]] = [[], []]

    def consume(index: int) -> None:
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 2.0:
            batch = consumers[index].receive(7, 0.1)
            if batch:
                taken[index] += batch.messages
                consumers[index].ack(batch)
                idle_since = time.monotonic()

    threads = [threading.Thread(target=consume, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    ids = [[m.id for m in messages] for messages in taken]
    assert not set(ids[0]) & set(ids[1])
    assert sorted(ids[0] + ids[1]) == sorted(m.id for m in sent)
    assert len(ids[0]) + len(ids[1]) == 400  # nobody got one twice either
    for consumer in consumers:
        consumer.close()
    output.close()


def test_a_claim_never_takes_documents_another_consumer_won_meanwhile(
    mongodb_url: str, collection: str
) -> None:
    """The race mq-bridge 0.3.2 loses: between consumer A's find and its update, consumer B
    claims the same documents. A must come away with none of them."""
    output = open_output(config(mongodb_url, collection))
    output.send([Message(b"%d" % i) for i in range(5)])
    with pymongo.MongoClient(mongodb_url) as client:
        coll = client[DATABASE][collection]
        rival = Claims(coll, {}, 60.0)

        class Interleaved:  # A's collection: B claims everything just before A updates
            def __getattr__(self, name: str) -> Any:
                return getattr(coll, name)

            def update_many(self, *args: Any, **kwargs: Any) -> Any:
                _, won = rival.claim(10)
                assert len(won) == 5
                return coll.update_many(*args, **kwargs)

        claim, mine = Claims(Interleaved(), {}, 60.0).claim(10)  # type: ignore[arg-type]
        assert mine == [] and claim.ids == []
    output.close()


def test_a_dead_consumers_documents_come_back_when_its_lease_ends(
    mongodb_url: str, collection: str
) -> None:
    cfg = config(mongodb_url, collection, lock_duration_ms=1500)
    output = open_output(cfg)
    sent = [Message(b"%d" % i) for i in range(5)]
    output.send(sent)
    script = (
        "import json, sys, time\n"
        "from mq_bridge.runtime.factory import build_input, new_context\n"
        "source = build_input(json.loads(sys.argv[1]), new_context('doomed'))\n"
        "source.connect()\n"
        "batch = source.receive(10, 10.0)\n"
        "print(len(batch), flush=True)\n"
        "time.sleep(600)\n"
    )
    doomed = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(cfg)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert doomed.stdout is not None
        assert doomed.stdout.readline().strip() == "5"  # it holds all five
        survivor = open_input(cfg)
        assert not survivor.receive(10, 0.0)  # still leased to the living claimer
        os.kill(doomed.pid, signal.SIGKILL)  # dies without ack, nack or close
        doomed.wait(10)
        got = drain(survivor, 5, timeout=30.0)
        assert sorted(m.id for m in got) == sorted(m.id for m in sent)
        survivor.close()
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait(10)
    output.close()


def test_receive_query_claims_only_matching_documents(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection))
    output.send([Message(b"%d" % i, {"kind": "a" if i % 2 else "b"}) for i in range(6)])
    source = open_input(config(mongodb_url, collection, receive_query='{"metadata.kind": "a"}'))
    got = drain(source, 6, timeout=1.0)
    assert sorted(m.payload for m in got) == [b"1", b"3", b"5"]
    source.close()
    everything = open_input(config(mongodb_url, collection))
    assert sorted(m.payload for m in drain(everything, 3)) == [b"0", b"2", b"4"]
    everything.close()
    output.close()


def test_mq_bridge_bookkeeping_documents_are_never_claimed(
    mongodb_url: str, collection: str
) -> None:
    with pymongo.MongoClient(mongodb_url) as client:
        client[DATABASE][collection].insert_many(
            [
                {"_id": f"{collection}:sequencer", "seq_counter": 3},
                {"_id": "cursor:c1", "last_seq": 2},
            ]
        )
    output = open_output(config(mongodb_url, collection))
    output.send_one(Message(b"real"))
    source = open_input(config(mongodb_url, collection))
    assert [m.payload for m in drain(source, 3, timeout=1.0)] == [b"real"]
    source.close()
    output.close()


# --- request/reply through <collection>_replies ------------------------------------------


def test_request_reply_through_the_replies_collection(mongodb_url: str, collection: str) -> None:
    cfg = config(mongodb_url, collection, request_reply=True, request_timeout_ms=10_000)
    responder = Route.from_config({"input": cfg, "output": {"response": {}}}).with_handler(
        lambda m: m.with_payload(b"re:" + m.payload)
    )
    with responder, Publisher.from_config(cfg) as publisher:
        reply = publisher.request(b"ping", {"k": "v"})
        assert reply.payload == b"re:ping" and reply.metadata["k"] == "v"
        replies = [publisher.request_json({"n": n}) for n in range(3)]
        assert [r.payload for r in replies] == [b're:{"n":%d}' % n for n in range(3)]
    assert documents(mongodb_url, f"{collection}_replies") == []  # each reply was taken


def test_a_request_nobody_answers_times_out(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection))
    with pytest.raises(RequestTimeoutError, match="correlation_id"):
        output.request(Message(b"ping"), 0.3)
    (request,) = documents(mongodb_url, collection)
    assert request["metadata"]["reply_to"] == f"{collection}_replies"
    output.close()


# --- connections, errors, TLS ------------------------------------------------------------


def test_connect_fails_within_the_server_selection_timeout() -> None:
    url = f"mongodb://127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=300"
    for build in (build_output, build_input):
        endpoint = build(config(url, "nothing"), new_context("test"))
        with pytest.raises(EndpointUnavailableError, match="cannot connect"):
            endpoint.connect()
        endpoint.close()


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"collection": None}, "collection"),
        ({"receive_query": "{not json"}, "receive_query"),
        ({"receive_query": "[1]"}, "receive_query"),
        ({"url": "http://127.0.0.1:27017"}, "url"),
        ({"format": "xml"}, "format"),
        ({"consume": "snapshot"}, "consume"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(
    options: dict[str, Any], path: str
) -> None:
    cfg = config("mongodb://127.0.0.1:27017/", "c")
    cfg["mongodb"].update(options)
    with pytest.raises(ConfigError, match=path):
        Publisher.from_config(cfg)


def test_shared_endpoints_use_one_client_and_unshared_their_own(
    mongodb_url: str, collection: str
) -> None:
    context = new_context("test")
    endpoints = [build_output(config(mongodb_url, collection), context) for _ in range(2)]
    endpoints.append(build_output(config(mongodb_url, collection, shared=False), context))
    for endpoint in endpoints:
        endpoint.connect()
    clients = [endpoint._lease.connection for endpoint in endpoints]  # type: ignore[attr-defined]
    assert clients[0] is clients[1] and clients[2] is not clients[0]
    for endpoint in endpoints:
        endpoint.close()


def test_tls_options_reach_pymongo(mongodb_url: str, collection: str, tmp_path: Path) -> None:
    """Through a local TLS proxy in front of the server: trusted with `ca_file`, refused
    without it (the system CAs do not know the proxy's certificate)."""
    context = self_signed_context(tmp_path)
    host, port = mongodb_url.split("//")[1].strip("/").split(":")
    proxy = TcpProxy((host, int(port)), tls=context)
    url = f"mongodb://localhost:{proxy.port}/?serverSelectionTimeoutMS=2000"
    try:
        trusted = config(url, collection, shared=False, tls={"required": True})
        trusted["mongodb"]["tls"]["ca_file"] = str(tmp_path / "cert.pem")
        output = open_output(trusted)
        output.send_one(Message(b"over tls"))
        output.close()
        assert [d["payload"] for d in documents(mongodb_url, collection)] == [b"over tls"]
        untrusted = build_output(
            config(url, collection, shared=False, tls={"required": True}), new_context("t")
        )
        with pytest.raises(EndpointUnavailableError):
            untrusted.connect()
        untrusted.close()
    finally:
        proxy.close()


def test_tls_arguments_for_pymongo(tmp_path: Path) -> None:
    """The `tls` block as pymongo's options; a separate key is joined to its certificate
    in a private temporary file (pymongo reads both from one file)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", "key.pem", "-out", "cert.pem", "-subj", "/CN=client"],
        cwd=tmp_path, check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    tls = {
        "required": True,
        "ca_file": str(tmp_path / "cert.pem"),
        "cert_file": str(tmp_path / "cert.pem"),
        "key_file": str(tmp_path / "key.pem"),
        "accept_invalid_certs": True,
    }
    options = parse_options(
        MongoDbOptions, config("mongodb://h:27017/?socketTimeoutMS=1", "c", tls=tls)["mongodb"]
    )
    arguments, combined = client_arguments(options)
    try:
        assert combined is not None and arguments["tlsCertificateKeyFile"] == combined
        text = Path(combined).read_text()
        assert "BEGIN CERTIFICATE" in text and "PRIVATE KEY" in text
        assert os.stat(combined).st_mode & 0o077 == 0
        assert arguments["tls"] is True and arguments["tlsCAFile"] == tls["ca_file"]
        assert arguments["tlsAllowInvalidCertificates"] is True
        assert "socketTimeoutMS" not in arguments  # the URL's own value wins
        assert arguments["serverSelectionTimeoutMS"] == 5000
    finally:
        if combined is not None:
            os.unlink(combined)
    missing = {**tls, "ca_file": str(tmp_path / "missing.pem")}
    options = parse_options(
        MongoDbOptions, config("mongodb://h:27017/", "c", tls=missing)["mongodb"]
    )
    with pytest.raises(ConfigError, match="ca_file"):
        client_arguments(options)


def test_source_metadata_names_database_collection_and_document(
    mongodb_url: str, collection: str
) -> None:
    output = open_output(config(mongodb_url, collection))
    message = Message(b"x", {"mqb.src.kafka_topic": "forged", "k": "v"})
    output.send_one(message)
    context = new_context("test")
    context.source_metadata = True
    source = build_input(config(mongodb_url, collection), context)
    source.connect()
    (got,) = drain(source, 1)
    assert got.metadata == {
        "k": "v",
        "mqb.src.mongodb_database": DATABASE,
        "mqb.src.mongodb_collection": collection,
        "mqb.src.mongodb_id": f"{message.id_int:032x}",
    }
    source.close()
    output.close()


@pytest.mark.parametrize(
    ("url", "options", "direct"),
    [
        ("mongodb://127.0.0.1:27017/", {}, True),
        ("mongodb://127.0.0.1:27017/?w=majority", {}, True),
        ("mongodb://127.0.0.1:27017/?w=0", {}, False),  # unacknowledged: pymongo's path
        ("mongodb://u:p@127.0.0.1:27017/", {}, False),  # credentials: pymongo authenticates
        ("mongodb://127.0.0.1:27017/", {"username": "u", "password": "p"}, False),
        ("mongodb://127.0.0.1:27017/?tls=true", {}, False),
        ("mongodb://127.0.0.1:27017/", {"tls": {"required": True}}, False),
        ("mongodb://127.0.0.1:27017/?compressors=zlib", {}, False),
    ],
)
def test_inserts_bypass_pymongo_only_where_nothing_is_negotiated(
    url: str, options: dict[str, Any], direct: bool
) -> None:
    parsed = parse_options(MongoDbOptions, config(url, "c", **options)["mongodb"])
    arguments, _ = client_arguments(parsed)
    with pymongo.MongoClient(url, connect=False, **arguments) as client:
        assert direct_eligible(parsed, client) is direct


def test_a_plain_connection_inserts_on_the_direct_link(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection))
    assert output.status().details["direct"] is True
    output.send([Message(b"%d" % i) for i in range(1200)])  # several OP_MSG sections' worth
    output.send_one(Message(b"one"))
    assert len(documents(mongodb_url, collection)) == 1201
    output.close()


def test_the_direct_link_splits_batches_at_the_servers_message_size(
    mongodb_url: str, collection: str
) -> None:
    with pymongo.MongoClient(mongodb_url) as client:
        client.admin.command("ping")
        inserter = DirectInserter(client, DATABASE, collection, "test")
        inserter.insert([{"_id": "first"}])  # connects: learns the server's limits
        inserter._max_message = 4_000  # as if the server took only ~4 kB per message
        inserter.insert([{"_id": f"d{i}", "pad": "x" * 200} for i in range(100)])
        inserter.close()
        assert client[DATABASE][collection].estimated_document_count() == 101
