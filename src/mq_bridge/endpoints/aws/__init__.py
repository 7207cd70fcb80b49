"""aws: Amazon SQS queues (input and output) and SNS topics (output), through boto3.

Features
    - Input (SQS consumer): long polling (`wait_time_seconds`, default 20) on a thread of
      the input's own, `max_messages` (1-10) per ReceiveMessage call, repeated without
      waiting until the batch is full or the queue has no more; `receive` still honours
      any timeout and `interrupt()`. `ack` = DeleteMessageBatch (acks in any order),
      `nack` = ChangeMessageVisibility 0 (delivered again at once); `close` gives back
      what was received but not acked. `status().pending` = ApproximateNumberOfMessages.
    - Output: SendMessageBatch to the queue and/or PublishBatch to the topic, 10 messages
      and 256 KiB a call, in order; `send` returns once SQS/SNS accepted every message.
      A message they refuse, or cannot carry (checked before sending: attribute names,
      their count, empty values, the body), fails alone (`SendError`), retriable unless
      it would fail again. FIFO queues and topics: MessageGroupId from metadata
      `message_group_id` (else the option), MessageDeduplicationId from metadata
      `message_deduplication_id`, else the message id (unless the queue deduplicates by
      content); a failure also fails the messages after it, so retries keep the order.
    - Wire (`codec`): metadata <-> String message attributes, the id as the attribute
      ``mq_bridge.message_id`` (32 hex digits); without it, the SQS MessageId is the id
      (mq-bridge 1.2.0's). `binary_payload_mode`: base64 body + ``aws_binary_encoded:
      true``, decoded by every consumer. With ``MQB_SOURCE_METADATA=1`` inputs add
      ``mqb.src.sqs_queue_url`` and ``mqb.src.sqs_message_id``.
    - Connections: one boto3 session and client per region, endpoint and credentials
      (`shared`); calls are bounded (3 s to connect, two attempts), so an unreachable
      server fails `connect()` within seconds; a missing queue or topic fails it too. The
      hot SQS calls (send, receive, delete, visibility) skip botocore's request pipeline
      (`direct`): the same signed request on a kept connection, ~0.7 ms less CPU a call.

URL
    queue_url   https://sqs.<region>.amazonaws.com/<account>/<queue> (or just the queue's
                name); http://127.0.0.1:5000/123456789012/<queue> on moto
    topic_arn   arn:aws:sns:<region>:<account>:<topic>

Modules: `options`, `client` (sessions, clients, errors), `direct` (the hot SQS calls),
`destinations` (queue/topic lookup), `codec` (the wire, pure), `reader` (the long-poller
thread), `input`, `output`.

Options (declared in `options.py`, `AwsOptions`; mq-bridge's `AwsConfig` names)
    queue_url            the queue (required for an input)
    topic_arn            output: the SNS topic
    region               the region (default: the AWS configuration; us-east-1 with
                         endpoint_url)
    endpoint_url         a local server (LocalStack, moto)
    access_key, secret_key, session_token
                         credentials (secrets; default: the AWS credential chain)
    max_messages         input: messages per ReceiveMessage call (1-10, default 10)
    wait_time_seconds    input: long poll (0-20, default 20)
    binary_payload_mode  output: base64 bodies (default false)
    message_group_id     output, FIFO: the group of messages without metadata for it
    shared               share the client (default true)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.aws.options import AwsOptions
from mq_bridge.endpoints.base import BuildContext

if TYPE_CHECKING:
    from mq_bridge.endpoints.aws.input import AwsInput
    from mq_bridge.endpoints.aws.output import AwsOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = AwsOptions


def build_input(options: AwsOptions, context: BuildContext) -> AwsInput:
    """An SQS consumer of `queue_url`."""
    from mq_bridge.endpoints.aws.input import AwsInput

    return AwsInput(options, context)


def build_output(options: AwsOptions, context: BuildContext) -> AwsOutput:
    """A publisher to `queue_url` and/or `topic_arn`."""
    from mq_bridge.endpoints.aws.output import AwsOutput

    return AwsOutput(options, context)
