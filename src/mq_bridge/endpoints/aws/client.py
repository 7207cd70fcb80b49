"""boto3 clients for SQS and SNS, shared per region, endpoint and credentials.

One `AwsClients` (a boto3 session and, made on first use, its thread-safe SQS and SNS
clients) per region, `endpoint_url` and credentials is shared by every aws endpoint of the
process through `BuildContext.connections` (``shared: true``).

Every call is bounded: connecting by `CONNECT_TIMEOUT`, reading by `READ_TIMEOUT` (longer
than the longest long poll, 20 s), and botocore tries a call at most `ATTEMPTS` times, so an
unreachable server fails `connect()` within seconds rather than after botocore's default
retries. Errors become the bridge's (`translated_errors`): unreachable, throttled or a server
error -> `EndpointUnavailableError` (retriable); refused credentials, no region or no
credentials -> `ConfigError`; a queue or topic that does not exist -> `ResourceMissingError`
(retriable: a server that lost its state, or a queue created later, recovers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from mq_bridge.endpoints.aws.options import DEFAULT_LOCAL_REGION, AwsOptions
from mq_bridge.endpoints.kit.connections import ConnectionRegistry, Lease, connection_key
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.errors import ConfigError, EndpointError, EndpointUnavailableError

if TYPE_CHECKING:
    import boto3
    import botocore.session

    from mq_bridge.endpoints.aws.direct import DirectSqs

__all__ = [
    "ATTEMPTS",
    "CONNECT_TIMEOUT",
    "READ_TIMEOUT",
    "AwsClients",
    "ResourceMissingError",
    "SqsCall",
    "acquire_clients",
    "raise_translated",
    "translated_errors",
]

ENDPOINT = "aws"
CONNECT_TIMEOUT = 3.0
READ_TIMEOUT = 35.0
ATTEMPTS = 2

_MISSING = frozenset(
    {
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "NotFound",
        "NotFoundException",
    }
)
_REFUSED_CREDENTIALS = frozenset(
    {
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "AccessDeniedException",
        "AuthorizationError",
        "UnrecognizedClientException",
        "InvalidAccessKeyId",
        "InvalidSecurity",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "ExpiredTokenException",
    }
)
_TRANSIENT = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
        "RequestTimeout",
        "KMS.ThrottlingException",
    }
)


#: ``call(operation, params) -> answer``: one SQS operation (see `AwsClients.sqs_call`).
SqsCall = Callable[[str, dict[str, Any]], dict[str, Any]]

_METHODS = {
    "ReceiveMessage": "receive_message",
    "SendMessageBatch": "send_message_batch",
    "DeleteMessageBatch": "delete_message_batch",
    "ChangeMessageVisibilityBatch": "change_message_visibility_batch",
}


class ResourceMissingError(EndpointUnavailableError):
    """The queue or topic does not exist (retriable: it may be created, or come back)."""


def driver() -> Any:
    """The boto3 package, or `ConfigError` naming ``pip install 'twainmq[aws]'``."""
    return require_driver("boto3", endpoint=ENDPOINT, extra="aws", package="boto3")


class AwsClients:
    """A boto3 session and its SQS and SNS clients (thread-safe), each made on first use."""

    def __init__(
        self,
        session: boto3.session.Session,
        core: botocore.session.Session,
        region: str,
        endpoint_url: str | None,
    ) -> None:
        self._session = session
        self._core = core
        self.region = region
        self.endpoint_url = endpoint_url
        self._lock = threading.RLock()
        self._clients: dict[str, Any] = {}
        self._direct: DirectSqs | None = None
        self._direct_made = False

    def sqs(self) -> Any:
        return self._client("sqs")

    def sns(self) -> Any:
        return self._client("sns")

    def direct_sqs(self) -> DirectSqs | None:
        """The SQS hot-path caller (`direct.DirectSqs`), or None where it would not do what
        botocore does (a proxy is configured)."""
        with self._lock:
            if not self._direct_made:
                self._direct = self._make_direct_sqs()
                self._direct_made = True
            return self._direct

    def sqs_call(self) -> SqsCall:
        """``call(operation, params)`` for the hot SQS operations: `DirectSqs` where it
        does what botocore would, else the boto3 client's method."""
        direct = self.direct_sqs()
        if direct is not None:
            return direct.call
        sqs = self.sqs()

        def call(operation: str, params: dict[str, Any]) -> dict[str, Any]:
            answer: dict[str, Any] = getattr(sqs, _METHODS[operation])(**params)
            return answer

        return call

    def _make_direct_sqs(self) -> DirectSqs | None:
        from botocore.httpsession import get_cert_path

        from mq_bridge.endpoints.aws.direct import DirectSqs

        endpoint_url = self._client("sqs").meta.endpoint_url
        if not DirectSqs.usable(endpoint_url):
            return None
        ca_bundle = self._core.get_config_variable("ca_bundle") or get_cert_path(True)
        return DirectSqs(
            endpoint_url,
            self._session.get_credentials(),
            self.region,
            ca_bundle if isinstance(ca_bundle, str) else None,
            CONNECT_TIMEOUT,
            READ_TIMEOUT,
        )

    def _client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            with self._lock:
                client = self._clients.get(service)
                if client is None:
                    client = self._clients[service] = self._make(service)
        return client

    def _make(self, service: str) -> Any:
        from botocore.config import Config

        config = Config(
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=READ_TIMEOUT,
            retries={"total_max_attempts": ATTEMPTS, "mode": "standard"},
            max_pool_connections=16,
        )
        return self._session.client(
            service, region_name=self.region, endpoint_url=self.endpoint_url, config=config
        )

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
            direct, self._direct, self._direct_made = self._direct, None, False
        for client in clients:
            client.close()
        if direct is not None:
            direct.close()


def acquire_clients(options: AwsOptions, registry: ConnectionRegistry) -> Lease[AwsClients]:
    """A lease on the shared clients for `options`' region, endpoint and credentials.

    `ConfigError` when no region or no credentials can be found. Nothing is sent yet: the
    endpoints check their queue or topic themselves, which also proves the server answers.
    """
    boto3 = driver()
    key = connection_key(
        ENDPOINT, region=options.region, endpoint_url=options.endpoint_url,
        access_key=options.access_key, secret_key=options.secret_key,
        session_token=options.session_token,
    )  # fmt: skip
    with translated_errors(options.describe()):  # a missing profile, a failing provider
        return registry.acquire(key, lambda: _open(boto3, options), _close, shared=options.shared)


def _open(boto3: Any, options: AwsOptions) -> AwsClients:
    import botocore.session

    core = botocore.session.Session()
    session = boto3.session.Session(
        botocore_session=core,
        aws_access_key_id=options.access_key,
        aws_secret_access_key=options.secret_key,
        aws_session_token=options.session_token,
        region_name=options.region,
    )
    region = options.region or session.region_name
    if region is None:
        if options.endpoint_url is None:
            raise ConfigError(
                "no AWS region: set `region` (or AWS_REGION / AWS_DEFAULT_REGION)",
                path=f"{ENDPOINT}.region",
            )
        region = DEFAULT_LOCAL_REGION
    if session.get_credentials() is None:
        raise ConfigError(
            "no AWS credentials: set `access_key` and `secret_key`, or configure the AWS "
            "credential chain (AWS_ACCESS_KEY_ID, ~/.aws/credentials, an instance role)",
            path=f"{ENDPOINT}.access_key",
        )
    return AwsClients(session, core, region, options.endpoint_url)


def _close(clients: AwsClients) -> None:
    clients.close()


@contextmanager
def translated_errors(where: str) -> Iterator[None]:
    """botocore's errors as the bridge's (see the module docstring)."""
    try:
        yield
    except Exception as error:
        raise_translated(error, where)


def raise_translated(error: BaseException, where: str) -> NoReturn:
    """Raise `error` as the bridge's error (`translated_errors`, for code that caught it)."""
    from botocore import exceptions

    if isinstance(error, exceptions.ClientError):
        raise _client_error(error, where) from error
    if isinstance(error, (exceptions.ConnectionError, exceptions.HTTPClientError)):
        raise EndpointUnavailableError(f"{where}: {error}") from error
    if isinstance(error, (exceptions.NoCredentialsError, exceptions.PartialCredentialsError)):
        raise ConfigError(f"{where}: {error}", path=f"{ENDPOINT}.access_key") from error
    if isinstance(error, exceptions.ProfileNotFound):
        raise ConfigError(f"{where}: {error} (AWS_PROFILE)", path=ENDPOINT) from error
    if isinstance(error, exceptions.NoRegionError):
        raise ConfigError(f"{where}: {error}", path=f"{ENDPOINT}.region") from error
    if isinstance(error, exceptions.BotoCoreError):
        raise EndpointError(f"{where}: {error}") from error
    raise error


def _client_error(error: Any, where: str) -> Exception:
    details = error.response.get("Error", {})
    code = str(details.get("Code", ""))
    text = f"{where}: {code}: {details.get('Message', '')}"
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    if code in _MISSING:
        return ResourceMissingError(f"{text} (create it, or check the queue URL / topic ARN)")
    if code in _REFUSED_CREDENTIALS:
        return ConfigError(f"{text} (check access_key, secret_key, session_token)", path=ENDPOINT)
    if code in _TRANSIENT or status >= 500:
        return EndpointUnavailableError(text)
    return EndpointError(text)
