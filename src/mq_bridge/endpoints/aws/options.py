"""Options of the `aws` endpoint (see `mq_bridge.endpoints.aws`).

Names, types, ranges and meanings are mq-bridge's `AwsConfig` (the same in mq-bridge-py
0.3.2 and mq-bridge 1.2.0). Where the peer's schema allows ``null`` for "the default", so do
we. Ours only: `message_group_id` (FIFO queues and topics, which the peer cannot publish to)
and `shared`.
"""

from __future__ import annotations

import re
from typing import ClassVar
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from mq_bridge.config.declarations import OptionError, Options, secret_field

__all__ = ["DEFAULT_LOCAL_REGION", "AwsOptions"]

#: The region signed for when `endpoint_url` names a local server and no region is set
#: anywhere (moto and LocalStack accept any; real AWS needs the queue's own).
DEFAULT_LOCAL_REGION = "us-east-1"
#: botocore's rule for a region name (`botocore.utils.validate_region_name`: a host label,
#: not all digits); it raises InvalidRegionError when the client is made, at run time.
_REGION = re.compile(r"(?![0-9]+$)(?!-)[a-zA-Z0-9-]{1,63}(?<!-)")


class AwsOptions(Options):
    """AWS SQS queues (input and output) and SNS topics (output).

    A consumer long-polls the queue `queue_url`; a publisher sends to the queue `queue_url`,
    to the SNS topic `topic_arn`, or to both.
    """

    #: Options where ``null`` means "the default" (the peer's schema allows it).
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset({"max_messages", "wait_time_seconds"})

    # Not `secret_field`s: that would make every endpoint's `queue_url` / `endpoint_url`
    # key secret. A password in a URL is hidden wherever config text is shown.
    queue_url: str | None = Field(
        None,
        min_length=1,
        description="The SQS queue URL (or the queue's name, looked up with GetQueueUrl). "
        "Required for Consumer. Optional for Publisher if `topic_arn` is set. If it contains "
        "userinfo, it will be treated as a secret.",
    )
    topic_arn: str | None = Field(
        None, min_length=1, description="(Publisher only) The SNS topic ARN."
    )
    region: str | None = Field(
        None,
        min_length=1,
        description='AWS Region (e.g., "us-east-1"). Default: the AWS configuration '
        "(AWS_REGION, ~/.aws/config); us-east-1 when `endpoint_url` is set.",
    )
    endpoint_url: str | None = Field(
        None,
        min_length=1,
        description="Custom endpoint URL (e.g., for LocalStack or moto: http://127.0.0.1:5000).",
    )
    access_key: str | None = secret_field(
        None,
        min_length=1,
        description="AWS Access Key ID. Default: the AWS credential chain.",
    )
    secret_key: str | None = secret_field(None, min_length=1, description="AWS Secret Access Key.")
    session_token: str | None = secret_field(None, min_length=1, description="AWS Session Token.")
    max_messages: int | None = Field(
        10,
        ge=1,
        le=10,
        description="(Consumer only) Maximum number of messages to receive in a batch (1-10): "
        "the size of each ReceiveMessage call. Default 10.",
    )
    wait_time_seconds: int | None = Field(
        20,
        ge=0,
        le=20,
        description="(Consumer only) Wait time for long polling in seconds (0-20). Default 20.",
    )
    binary_payload_mode: bool = Field(
        False,
        description="Use binary payloads in SQS/SNS messages: the body is the payload in "
        "base64, marked by the attribute `aws_binary_encoded: true` (which consumers decode "
        "whatever this option says).",
    )
    message_group_id: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="(Publisher, FIFO queues and topics) The MessageGroupId of messages whose "
        "metadata has no `message_group_id`. Without either, a FIFO send fails.",
    )
    shared: bool = Field(
        True,
        description="Share one AWS client per region, endpoint and credentials with the "
        "process's other aws endpoints.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> AwsOptions:
        if self.region is not None and not _REGION.fullmatch(self.region):
            raise OptionError(
                "region", f"not an AWS region name such as us-east-1: {self.region[:80]!r}"
            )
        if (self.access_key is None) != (self.secret_key is None):
            missing = "secret_key" if self.secret_key is None else "access_key"
            raise OptionError(missing, "`access_key` and `secret_key` go together: set both")
        if self.session_token is not None and self.access_key is None:
            raise OptionError("session_token", "a session token needs `access_key`/`secret_key`")
        if self.endpoint_url is not None:
            parts = urlsplit(self.endpoint_url)
            if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
                raise OptionError(
                    "endpoint_url", "must be an http:// or https:// URL (http://127.0.0.1:5000)"
                )
        if self.topic_arn is not None and not self.topic_arn.startswith("arn:"):
            raise OptionError(
                "topic_arn", "must be a topic ARN (arn:aws:sns:us-east-1:123456789012:orders)"
            )
        return self

    @property
    def batch_limit(self) -> int:
        """Messages per ReceiveMessage call (SQS allows at most 10)."""
        return 10 if self.max_messages is None else self.max_messages

    @property
    def long_poll_seconds(self) -> int:
        return 20 if self.wait_time_seconds is None else self.wait_time_seconds

    def describe(self) -> str:
        """The queue and/or topic, without credentials (a URL's userinfo is dropped)."""
        targets = [_without_userinfo(self.queue_url)] if self.queue_url else []
        if self.topic_arn:
            targets.append(self.topic_arn)
        return "aws:" + (" + ".join(targets) or "(no queue or topic)")


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
