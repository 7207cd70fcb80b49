"""TLS options shared by the endpoints, and the client `ssl.SSLContext` they describe.

The ``tls`` block has mq-bridge's fields and meanings:

    tls:
      required: true               # enable TLS
      ca_file: /etc/ca.pem         # verifies the server (else the system's CAs)
      cert_file: /etc/client.pem   # client certificate (mutual TLS)
      key_file: /etc/client.key    # its private key (else read from cert_file)
      cert_password: "..."         # the key's password, when it is encrypted (a secret)
      accept_invalid_certs: false  # true: no certificate or hostname check (insecure)

A URL whose scheme means TLS (``amqps://``, ``mqtts://``, ``rediss://``, ``nats+tls://``,
``tls://``, ``ssl://``, ``https://``, ``wss://``) turns TLS on as ``required: true`` does.
A file that cannot be read or used, and a wrong password, raise `ConfigError` naming the
field (``tls.ca_file``...) and the file, when the context is built (at connect), not later
in the handshake.
"""

from __future__ import annotations

import ssl

from pydantic import Field, model_validator

from mq_bridge.config.declarations import Options, secret_field
from mq_bridge.errors import ConfigError

__all__ = ["TLS_SCHEMES", "TlsOptions", "ssl_context", "tls_required"]

#: URL schemes that imply TLS (compared lower-case).
TLS_SCHEMES = frozenset({"amqps", "mqtts", "ssl", "tls", "rediss", "nats+tls", "https", "wss"})


class TlsOptions(Options):
    """TLS configuration for secure connections."""

    required: bool = Field(False, description="If true, enable TLS/SSL.")
    ca_file: str | None = Field(
        None,
        description="Path to the CA certificate file (PEM) that verifies the server; "
        "the system's trusted CAs when omitted.",
    )
    cert_file: str | None = Field(
        None, description="Path to the client certificate file (PEM), for mutual TLS."
    )
    key_file: str | None = Field(
        None,
        description="Path to the client private key file (PEM); read from cert_file when omitted.",
    )
    cert_password: str | None = secret_field(
        description="Password for the private key (if encrypted)."
    )
    accept_invalid_certs: bool = Field(
        False,
        description="If true, disable server certificate verification, hostname check "
        "included (insecure).",
    )

    @model_validator(mode="after")
    def _key_needs_certificate(self) -> TlsOptions:
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("key_file needs cert_file (the certificate the key belongs to)")
        return self


#: The defaults, for a URL that implies TLS without a ``tls`` block.
_NO_TLS_OPTIONS = TlsOptions.model_validate({})


def tls_required(tls: TlsOptions | None, url: str | None = None) -> bool:
    """Whether a connection uses TLS: ``tls.required``, or `url`'s scheme implies it.

    >>> tls_required(None, "amqps://broker:5671")
    True
    """
    if tls is not None and tls.required:
        return True
    if url is None or "://" not in url:
        return False
    return url.split("://", 1)[0].strip().lower() in TLS_SCHEMES


def ssl_context(
    tls: TlsOptions | None, url: str | None = None, *, path: str = "tls"
) -> ssl.SSLContext | None:
    """A client context for `tls`, or None when TLS is not required (see `tls_required`).

    `path` is where the block sits in the config; errors name ``{path}.ca_file`` etc.
    """
    if not tls_required(tls, url):
        return None
    tls = tls or _NO_TLS_OPTIONS
    context = ssl.create_default_context()
    if tls.ca_file is not None:
        _check_readable(tls.ca_file, f"{path}.ca_file")
        try:
            context.load_verify_locations(cafile=tls.ca_file)
        except ssl.SSLError as error:
            raise ConfigError(
                f"no usable CA certificate in {tls.ca_file!r} ({error.reason or error})",
                path=f"{path}.ca_file",
            ) from None
    if tls.accept_invalid_certs:
        context.check_hostname = False  # must precede verify_mode = CERT_NONE
        context.verify_mode = ssl.CERT_NONE
    if tls.cert_file is not None:
        _load_client_certificate(context, tls, tls.cert_file, path)
    return context


def _load_client_certificate(
    context: ssl.SSLContext, tls: TlsOptions, cert_file: str, path: str
) -> None:
    _check_readable(cert_file, f"{path}.cert_file")
    if tls.key_file is not None:
        _check_readable(tls.key_file, f"{path}.key_file")
    try:
        # An empty password, never None: with None OpenSSL asks for one on the terminal.
        context.load_cert_chain(cert_file, tls.key_file, password=tls.cert_password or "")
    except ssl.SSLError as error:
        raise _certificate_error(tls, cert_file, error, path) from None


def _certificate_error(
    tls: TlsOptions, cert_file: str, error: ssl.SSLError, path: str
) -> ConfigError:
    """Name the field at fault: OpenSSL reports most failures as an opaque "PEM lib"."""
    key_file = tls.key_file or cert_file
    key_field = f"{path}.key_file" if tls.key_file else f"{path}.cert_file"
    if error.reason == "KEY_VALUES_MISMATCH":
        message = f"the key in {key_file!r} does not match the certificate in {cert_file!r}"
        return ConfigError(message, path=key_field)
    if "-----BEGIN CERTIFICATE-----" not in _read_text(cert_file):
        return ConfigError(f"no PEM certificate in {cert_file!r}", path=f"{path}.cert_file")
    if "ENCRYPTED" in _read_text(key_file):
        if tls.cert_password is None:
            message = f"the key in {key_file!r} is encrypted: set {path}.cert_password"
        else:
            message = f"wrong password for the key in {key_file!r}"
        return ConfigError(message, path=f"{path}.cert_password")
    message = f"no usable private key in {key_file!r} ({error.reason or error})"
    return ConfigError(message, path=key_field)


def _check_readable(path: str, field: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise ConfigError(f"cannot read {path!r}: {error.strerror or error}", path=field) from None


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as file:
            return file.read().decode("ascii", "replace")
    except OSError:
        return ""
