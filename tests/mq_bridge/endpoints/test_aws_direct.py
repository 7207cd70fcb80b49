"""`direct.DirectSqs`, the SQS hot path beside botocore: same answers, same errors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from mq_bridge.endpoints.aws.client import (
    AwsClients,
    ResourceMissingError,
    acquire_clients,
    raise_translated,
)
from mq_bridge.endpoints.aws.options import AwsOptions
from mq_bridge.endpoints.kit.connections import ConnectionRegistry
from mq_bridge.errors import EndpointUnavailableError
from tests.mq_bridge.endpoints.test_aws import config, delete_queue, new_queue

pytestmark = pytest.mark.sqs


def clients_for(endpoint: str) -> AwsClients:
    options = AwsOptions.model_validate(config(endpoint, shared=False)["aws"])
    return acquire_clients(options, ConnectionRegistry()).connection


@pytest.fixture
def clients(sqs_endpoint: str) -> Iterator[AwsClients]:
    clients = clients_for(sqs_endpoint)
    try:
        yield clients
    finally:
        clients.close()


def test_answers_are_what_boto3_returns(sqs_endpoint: str, clients: AwsClients) -> None:
    direct = clients.direct_sqs()
    assert direct is not None
    url = new_queue(sqs_endpoint)
    try:
        entries = [
            {
                "Id": "0",
                "MessageBody": "x",
                "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}},
            }
        ]
        sent = direct.call("SendMessageBatch", {"QueueUrl": url, "Entries": entries})
        assert [s["Id"] for s in sent["Successful"]] == ["0"]
        request = {"QueueUrl": url, "MessageAttributeNames": ["All"], "WaitTimeSeconds": 1}
        (ours,) = direct.call("ReceiveMessage", request)["Messages"]
        clients.sqs().change_message_visibility(
            QueueUrl=url, ReceiptHandle=ours["ReceiptHandle"], VisibilityTimeout=0
        )
        (theirs,) = clients.sqs().receive_message(**request)["Messages"]
        assert {k: v for k, v in ours.items() if k != "ReceiptHandle"} == {
            k: v for k, v in theirs.items() if k != "ReceiptHandle"
        }
    finally:
        delete_queue(sqs_endpoint, url)


def test_a_missing_queue_is_the_same_error_as_through_boto3(
    sqs_endpoint: str, clients: AwsClients
) -> None:
    direct = clients.direct_sqs()
    assert direct is not None
    url = f"{sqs_endpoint}/123456789012/missing-{uuid.uuid4().hex[:8]}"
    entries = [{"Id": "0", "MessageBody": "x"}]
    with pytest.raises(Exception) as through_direct:
        direct.call("SendMessageBatch", {"QueueUrl": url, "Entries": entries})
    with pytest.raises(Exception) as through_boto3:
        clients.sqs().send_message_batch(QueueUrl=url, Entries=entries)
    assert (
        through_direct.value.response["Error"]["Code"]
        == (  # type: ignore[attr-defined]
            through_boto3.value.response["Error"]["Code"]  # type: ignore[attr-defined]
        )
    )
    with pytest.raises(ResourceMissingError):
        raise_translated(through_direct.value, "aws:q")


def test_an_unreachable_server_is_a_retriable_error() -> None:
    clients = clients_for("http://127.0.0.1:1")
    try:
        direct = clients.direct_sqs()
        assert direct is not None
        with pytest.raises(Exception) as caught:
            direct.call("ReceiveMessage", {"QueueUrl": "http://127.0.0.1:1/1/q"})
        with pytest.raises(EndpointUnavailableError):
            raise_translated(caught.value, "aws:q")
    finally:
        clients.close()


def test_with_a_proxy_the_calls_go_through_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    clients = clients_for("http://sqs.example.test:4566")
    try:
        assert clients.direct_sqs() is None
    finally:
        clients.close()


def test_a_kept_connection_the_server_closed_while_idle_is_replaced_once() -> None:
    """A server that drops idle keep-alive connections (as SQS's load balancers do): the
    next call finds its kept connection closed, and is sent once more on a fresh one."""
    import http.server
    import threading

    from botocore.credentials import Credentials

    from mq_bridge.endpoints.aws.direct import DirectSqs

    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            requests.append(self.headers["X-Amz-Target"])
            self.send_response(200)
            self.send_header("Content-Type", "application/x-amz-json-1.0")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
            self.close_connection = True  # closed after the answer, without saying so

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        direct = DirectSqs(url, Credentials("a", "b"), "us-east-1", None, 3.0, 5.0)
        assert direct.call("SendMessageBatch", {"QueueUrl": "q", "Entries": []}) == {}
        assert direct.call("SendMessageBatch", {"QueueUrl": "q", "Entries": []}) == {}
        assert requests == ["AmazonSQS.SendMessageBatch"] * 2
        direct.close()
    finally:
        server.shutdown()
        server.server_close()
