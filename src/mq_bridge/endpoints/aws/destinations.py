"""Finding the queue or topic an endpoint names, and what kind it is (FIFO or not).

Both checks are the endpoints' first call to the server, so they also prove it answers:
`connect()` fails here when the server is unreachable, the credentials are refused or the
queue/topic does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mq_bridge.endpoints.aws.client import translated_errors

__all__ = ["Queue", "Topic", "is_queue_url", "open_queue", "open_topic"]

_DEFAULT_VISIBILITY_TIMEOUT = 30


@dataclass(frozen=True, slots=True)
class Queue:
    """An SQS queue: its URL and the attributes the endpoints act on."""

    url: str
    fifo: bool
    content_deduplication: bool
    #: seconds a received message stays invisible to other consumers
    visibility_timeout: int


@dataclass(frozen=True, slots=True)
class Topic:
    """An SNS topic."""

    arn: str
    fifo: bool
    content_deduplication: bool


def is_queue_url(queue: str) -> bool:
    """A URL (https://sqs.../123456789012/orders) rather than a queue's name (orders)."""
    return "://" in queue


def open_queue(sqs: Any, queue: str, where: str) -> Queue:
    """The queue `queue` (a URL, or a name looked up with GetQueueUrl) and its attributes."""
    with translated_errors(where):
        url = queue if is_queue_url(queue) else sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        attributes = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["FifoQueue", "ContentBasedDeduplication", "VisibilityTimeout"],
        ).get("Attributes", {})
    fifo = attributes.get("FifoQueue") == "true" or url.endswith(".fifo")
    return Queue(
        url=url,
        fifo=fifo,
        content_deduplication=attributes.get("ContentBasedDeduplication") == "true",
        visibility_timeout=int(attributes.get("VisibilityTimeout", _DEFAULT_VISIBILITY_TIMEOUT)),
    )


def open_topic(sns: Any, arn: str, where: str) -> Topic:
    """The topic `arn` and its attributes (GetTopicAttributes)."""
    with translated_errors(where):
        attributes = sns.get_topic_attributes(TopicArn=arn).get("Attributes", {})
    return Topic(
        arn=arn,
        fifo=attributes.get("FifoTopic") == "true" or arn.endswith(".fifo"),
        content_deduplication=attributes.get("ContentBasedDeduplication") == "true",
    )
