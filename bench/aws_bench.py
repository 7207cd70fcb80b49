"""SQS throughput of mq_bridge's `aws` endpoint on moto, using only the seed's public API.

One script measures us and the peers, each in its own venv, in the same sitting:

    .venv/bin/python bench/aws_bench.py --scenario all
    .peers/mq-bridge/bin/python bench/aws_bench.py --scenario all      # mq-bridge 1.2.0
    .peers/mq-bridge-py/bin/python bench/aws_bench.py --scenario all   # mq-bridge-py 0.3.2

Scenarios (~100 B JSON messages with one metadata entry; each figure is the median of
--runs):

    send-json    Publisher.send_json one at a time (each returns once SQS accepted it)
    send-batch   Publisher.send_batch of 500 (mq-bridge-py 0.3.2 has no send_batch: skipped)
    consume      Consumer.poll(max=500) + commit() over a queue filled beforehand (by raw
                 SendMessageBatch calls, the same for every library), until all was read

Each run also prints (to stderr) the client's own CPU time per message (`process_time`, all
of the process's threads): what the library costs, whatever the server's pace.

The server is moto (scripts/services.sh start sqs), a single Python process: its own cost
per call (and its receive, which walks the queue) dominates, so the figures compare the
clients' overhead on top of the same server, not what SQS itself would give. Queues are
created and deleted with raw query-API calls (the peers' venvs have no boto3).
"""

from __future__ import annotations

import re
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable

from harness import DOC, KIND, payloads, run_scenarios
from mq_bridge import Consumer, Publisher

ENDPOINT = "http://127.0.0.1:5000"
_AUTH = (
    "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/sqs/aws4_request, "
    "SignedHeaders=host, Signature=0"
)


def sqs_call(action: str, url: str = ENDPOINT + "/", **params: str) -> str:
    """One SQS query-API call (moto does not check signatures); the XML answer."""
    data = urllib.parse.urlencode({"Action": action, "Version": "2012-11-05", **params})
    request = urllib.request.Request(
        url,
        data=data.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Authorization": _AUTH},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return str(answer.read().decode())


def create_queue(tag: str) -> str:
    answer = sqs_call("CreateQueue", QueueName=f"bench-{tag}-{uuid.uuid4().hex[:8]}")
    match = re.search(r"<QueueUrl>(.*?)</QueueUrl>", answer)
    assert match is not None, answer
    return match.group(1)


def delete_queue(url: str) -> None:
    sqs_call("DeleteQueue", url, QueueUrl=url)


def fill(url: str, count: int) -> None:
    """`count` documents with one attribute, 10 per raw SendMessageBatch."""
    bodies = [body.decode() for body in payloads(count)]
    for start in range(0, count, 10):
        params: dict[str, str] = {"QueueUrl": url}
        for k, body in enumerate(bodies[start : start + 10], 1):
            entry = f"SendMessageBatchRequestEntry.{k}"
            params[f"{entry}.Id"] = str(k)
            params[f"{entry}.MessageBody"] = body
            params[f"{entry}.MessageAttribute.1.Name"] = "kind"
            params[f"{entry}.MessageAttribute.1.Value.DataType"] = "String"
            params[f"{entry}.MessageAttribute.1.Value.StringValue"] = KIND["kind"]
        sqs_call("SendMessageBatch", url, **params)


def config(url: str) -> dict[str, dict[str, object]]:
    return {
        "aws": {
            "queue_url": url,
            "endpoint_url": ENDPOINT,
            "region": "us-east-1",
            "access_key": "test",
            "secret_key": "test",
        }
    }


def report_cpu(name: str, cpu_started: float, count: int) -> None:
    """The process's CPU time per message since `cpu_started`, to stderr."""
    cost = (time.process_time() - cpu_started) / count * 1e6
    print(f"  {name}: client CPU {cost:,.0f} us/msg", file=sys.stderr, flush=True)


def close(endpoint: object) -> None:
    closer = getattr(endpoint, "close", None)
    if closer is not None:
        closer()


def send_json_run(count: int) -> float:
    url = create_queue("send")
    try:
        publisher = Publisher.from_config(config(url))
        started, cpu = time.perf_counter(), time.process_time()
        for n in range(count):
            DOC["n"] = n
            publisher.send_json(DOC, KIND)
        elapsed = time.perf_counter() - started
        report_cpu("send-json", cpu, count)
        close(publisher)
        return count / elapsed
    finally:
        delete_queue(url)


def send_batch_run(count: int) -> float:
    url = create_queue("batch")
    data = payloads(count)
    try:
        publisher = Publisher.from_config(config(url))
        started, cpu = time.perf_counter(), time.process_time()
        for start in range(0, count, 500):
            publisher.send_batch(data[start : start + 500])
        elapsed = time.perf_counter() - started
        report_cpu("send-batch", cpu, count)
        close(publisher)
        return count / elapsed
    finally:
        delete_queue(url)


def consume_run(count: int) -> float:
    url = create_queue("consume")
    try:
        fill(url, count)
        consumer = Consumer.from_config(config(url))
        seen, deadline = 0, time.monotonic() + 300
        started, cpu = time.perf_counter(), time.process_time()
        while seen < count and time.monotonic() < deadline:
            # A long timeout: mq-bridge gathers all 500 before it returns, and on moto that
            # can take seconds; when its poll times out first, what it gathered is lost
            # from view until the visibility timeout (see docs/endpoints/aws.md).
            batch = consumer.poll(max=500, timeout_ms=60_000)
            for message in batch:
                _ = message.payload
            seen += len(batch)
            if batch:
                consumer.commit()
        elapsed = time.perf_counter() - started
        report_cpu("consume", cpu, count)
        close(consumer)
        if seen != count:
            sys.exit(f"consumed {seen} of {count}")
        return count / elapsed
    finally:
        delete_queue(url)


SCENARIOS: dict[str, tuple[Callable[[int], float], int]] = {
    # Small counts: moto's calls get slower as its queue grows (it walks the queue).
    "send-json": (send_json_run, 300),
    "send-batch": (send_batch_run, 500),
    "consume": (consume_run, 500),
}


def skip(name: str) -> str | None:
    if name == "send-batch" and not hasattr(Publisher, "send_batch"):
        return "this mq_bridge has no Publisher.send_batch"
    return None


if __name__ == "__main__":
    run_scenarios(__doc__, SCENARIOS, skip)
