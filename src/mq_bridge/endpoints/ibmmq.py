"""ibmmq: IBM MQ queues and topics — configuration accepted, not usable in this build.

IBM MQ needs IBM's client library (``libmqm_r``, the MQ redistributable client) and a
Python binding (``pymqi``), neither of which can be installed from PyPI alone. This endpoint
accepts and validates mq-bridge-py 0.3.2's ``ibmmq`` keys, so a config written for it
validates, and building it (``start()``, ``from_config``) fails at once with an error that
says exactly what is missing — never a silent failure.

Options (mq-bridge-py 0.3.2's ``IbmMqConfig``)
    url             ``host(port)``, comma-separated for failover (required)
    queue_manager   the queue manager, e.g. QM1 (required)
    channel         the SVRCONN channel (required)
    queue / topic   where to read or write (one of them; queue defaults to the route name)
    username, password (secret), cipher_spec, tls, max_message_size, wait_timeout_ms,
    internal_buffer_size, disable_status
"""

from __future__ import annotations

import ctypes.util
from typing import Any

from pydantic import Field

from mq_bridge.config.declarations import Options, secret_field
from mq_bridge.endpoints.base import BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.errors import EndpointError

__all__ = ["OPTIONS", "IbmMqOptions", "build_input", "build_output"]


class IbmMqOptions(Options):
    """Connection settings for an IBM MQ queue manager (needs IBM's MQ client library)."""

    model_config = {**Options.model_config, "title": "IbmMqConfig"}

    url: str = Field(min_length=1, description="host(port), comma-separated for failover.")
    queue_manager: str = Field(min_length=1, description="The queue manager, e.g. QM1.")
    channel: str = Field(min_length=1, description="The server-connection channel.")
    queue: str | None = Field(None, description="Queue for point-to-point messaging.")
    topic: str | None = Field(None, description="Topic string for publish/subscribe.")
    username: str | None = Field(None, description="User name, if the channel needs one.")
    password: str | None = secret_field(None, description="Password, if the channel needs one.")
    cipher_spec: str | None = Field(None, description="TLS CipherSpec, e.g. ANY_TLS12.")
    tls: dict[str, Any] | None = Field(None, description="TLS settings (key repository).")
    max_message_size: int | None = Field(None, ge=1, description="Largest message, bytes.")
    wait_timeout_ms: int | None = Field(None, ge=0, description="Get wait, milliseconds.")
    internal_buffer_size: int | None = Field(None, ge=1, description="Accepted; not used.")
    disable_status: bool | None = Field(None, description="Accepted; not used.")


OPTIONS = IbmMqOptions


def _unavailable(options: IbmMqOptions) -> EndpointError:
    library = ctypes.util.find_library("mqm_r")
    client = f"found at {library}" if library else "not found on this machine"
    where = options.queue or options.topic or "(the route's name)"
    return EndpointError(
        f"ibmmq {options.queue_manager}/{where}: this build of mq_bridge cannot talk to IBM "
        f"MQ: it needs IBM's MQ client library libmqm_r ({client}) and a binding to it, "
        "which this version does not include. Bridge IBM MQ through an endpoint this build "
        "supports, or use mq-bridge with its ibm-mq feature"
    )


def build_input(options: IbmMqOptions, context: BuildContext) -> InputEndpoint:
    raise _unavailable(options)


def build_output(options: IbmMqOptions, context: BuildContext) -> OutputEndpoint:
    raise _unavailable(options)
