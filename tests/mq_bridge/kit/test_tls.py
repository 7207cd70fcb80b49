"""`TlsOptions` and `ssl_context` against a real TLS echo server on 127.0.0.1.

The CA, the server and client certificates and an encrypted client key are made here with
the ``openssl`` command line (the `cryptography` package is not a dependency).
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mq_bridge.config.declarations import parse_options, schema_fragment, secret_fields
from mq_bridge.endpoints.kit.tls import TlsOptions, ssl_context, tls_required
from mq_bridge.errors import ConfigError

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]

PASSWORD = "s3cret-pass"


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_key_encrypted: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _new_key_and_request(name: str, subject: str, cwd: Path) -> None:
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd,
    )  # fmt: skip


def _sign(name: str, cwd: Path, extensions: str | None = None) -> None:
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key"]
    args += ["-CAcreateserial", "-out", f"{name}.pem", "-days", "2"]
    if extensions is not None:
        (cwd / f"{name}.ext").write_text(extensions)
        args += ["-extfile", f"{name}.ext"]
    _openssl(*args, cwd=cwd)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    cwd = tmp_path_factory.mktemp("pki")
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=kit test CA",
        cwd=cwd,
    )  # fmt: skip
    _new_key_and_request("server", "/CN=localhost", cwd)
    _sign("server", cwd, "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _new_key_and_request("client", "/CN=kit test client", cwd)
    _sign("client", cwd)
    _openssl(
        "pkey", "-in", "client.key", "-aes256", "-passout", f"pass:{PASSWORD}",
        "-out", "client-encrypted.key", cwd=cwd,
    )  # fmt: skip
    return Pki(
        ca=cwd / "ca.pem",
        server_cert=cwd / "server.pem",
        server_key=cwd / "server.key",
        client_cert=cwd / "client.pem",
        client_key=cwd / "client.key",
        client_key_encrypted=cwd / "client-encrypted.key",
    )


class EchoServer:
    """A TLS server on 127.0.0.1 that echoes one read per connection, on a thread."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._context = context
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.client_subjects: list[object] = []
        self._thread = threading.Thread(target=self._serve, name="tls-echo", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # the listener was shut down
                return
            connection.settimeout(10)
            try:
                with self._context.wrap_socket(connection, server_side=True) as tls:
                    peer = tls.getpeercert()
                    if peer:
                        self.client_subjects.append(peer["subject"])
                    tls.sendall(tls.recv(1024))
            except (ssl.SSLError, OSError):
                connection.close()  # a failed handshake: the client sees why

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept() (Linux)
        self._listener.close()
        self._thread.join(10)


def _server_context(pki: Pki, require_client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if require_client_cert:
        context.load_verify_locations(cafile=pki.ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@pytest.fixture(scope="module")
def server(pki: Pki) -> Iterator[EchoServer]:
    echo = EchoServer(_server_context(pki, require_client_cert=False))
    yield echo
    echo.close()


@pytest.fixture(scope="module")
def mtls_server(pki: Pki) -> Iterator[EchoServer]:
    echo = EchoServer(_server_context(pki, require_client_cert=True))
    yield echo
    echo.close()


def _echo(context: ssl.SSLContext, port: int, host: str = "127.0.0.1") -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(b"ping")
        return tls.recv(1024)


def _context(**options: object) -> ssl.SSLContext:
    context = ssl_context(parse_options(TlsOptions, {"required": True, **options}, "tls"))
    assert context is not None
    return context


# --- the options ------------------------------------------------------------------------


def test_options_have_the_peer_fields_defaults_and_descriptions() -> None:
    fragment = schema_fragment(TlsOptions)
    properties = fragment["properties"]
    assert set(properties) == {
        "required",
        "ca_file",
        "cert_file",
        "key_file",
        "cert_password",
        "accept_invalid_certs",
    }
    assert all(prop.get("description") for prop in properties.values())
    assert properties["required"]["default"] is False
    assert properties["accept_invalid_certs"]["default"] is False
    assert secret_fields(TlsOptions) == {"cert_password"}


def test_options_reject_unknown_keys_and_a_key_without_a_certificate() -> None:
    with pytest.raises(ConfigError, match=r"nats\.tls\.verify"):
        parse_options(TlsOptions, {"verify": False}, "nats.tls")
    with pytest.raises(ConfigError, match="key_file needs cert_file"):
        parse_options(TlsOptions, {"key_file": "client.key"}, "nats.tls")


def test_no_context_unless_required_or_implied_by_the_url() -> None:
    assert ssl_context(None) is None
    assert ssl_context(parse_options(TlsOptions, {"ca_file": "/nowhere"})) is None
    assert ssl_context(None, "nats://127.0.0.1:4222") is None
    for url in ["amqps://h", "MQTTS://h:8883", "rediss://h", "nats+tls://h", "tls://h"]:
        assert tls_required(None, url), url
        assert isinstance(ssl_context(None, url), ssl.SSLContext)
    assert not tls_required(None, "amqp://h")
    assert not tls_required(None, "localhost:4222")
    assert tls_required(parse_options(TlsOptions, {"required": True}), "amqp://h")


# --- verifying the server ---------------------------------------------------------------


def test_the_ca_file_verifies_the_server(pki: Pki, server: EchoServer) -> None:
    context = _context(ca_file=str(pki.ca))
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert _echo(context, server.port) == b"ping"
    assert _echo(context, server.port, host="localhost") == b"ping"


def test_without_the_ca_file_the_server_is_not_trusted(server: EchoServer) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _echo(_context(), server.port)


def test_the_hostname_is_checked(pki: Pki, server: EchoServer) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match=r"[Hh]ostname"):
        _echo(_context(ca_file=str(pki.ca)), server.port, host="not-the-server.example")


def test_accept_invalid_certs_skips_verification_and_hostname(server: EchoServer) -> None:
    context = _context(accept_invalid_certs=True)
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    assert _echo(context, server.port, host="not-the-server.example") == b"ping"


# --- client certificates ----------------------------------------------------------------


def test_mutual_tls_with_a_client_certificate(pki: Pki, mtls_server: EchoServer) -> None:
    context = _context(
        ca_file=str(pki.ca), cert_file=str(pki.client_cert), key_file=str(pki.client_key)
    )
    assert _echo(context, mtls_server.port) == b"ping"
    assert ((("commonName", "kit test client"),),) in mtls_server.client_subjects


def test_mutual_tls_without_a_client_certificate_is_refused(
    pki: Pki, mtls_server: EchoServer
) -> None:
    # With TLS 1.3 the refusal arrives after the client's side of the handshake: on read.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        if _echo(_context(ca_file=str(pki.ca)), mtls_server.port) == b"":
            raise ConnectionError("closed by the server")


def test_certificate_and_key_in_one_file(pki: Pki, mtls_server: EchoServer, tmp_path: Path) -> None:
    both = tmp_path / "client-both.pem"
    both.write_bytes(pki.client_cert.read_bytes() + pki.client_key.read_bytes())
    assert _echo(_context(ca_file=str(pki.ca), cert_file=str(both)), mtls_server.port) == b"ping"


def test_an_encrypted_key_with_its_password(pki: Pki, mtls_server: EchoServer) -> None:
    context = _context(
        ca_file=str(pki.ca),
        cert_file=str(pki.client_cert),
        key_file=str(pki.client_key_encrypted),
        cert_password=PASSWORD,
    )
    assert _echo(context, mtls_server.port) == b"ping"


def test_an_encrypted_key_with_a_wrong_password(pki: Pki) -> None:
    with pytest.raises(ConfigError) as caught:
        _context(
            cert_file=str(pki.client_cert),
            key_file=str(pki.client_key_encrypted),
            cert_password="not-the-password-42",
        )
    assert caught.value.path == "tls.cert_password"
    assert str(pki.client_key_encrypted) in str(caught.value)
    assert "not-the-password-42" not in str(caught.value)


def test_an_encrypted_key_without_a_password_asks_for_one(pki: Pki) -> None:
    # (And never prompts on the terminal, as OpenSSL does when given no password.)
    with pytest.raises(ConfigError, match="encrypted") as caught:
        _context(cert_file=str(pki.client_cert), key_file=str(pki.client_key_encrypted))
    assert caught.value.path == "tls.cert_password"


# --- files that cannot be used ----------------------------------------------------------


@pytest.mark.parametrize("field", ["ca_file", "cert_file", "key_file"])
def test_a_missing_file_is_named_with_its_field(pki: Pki, tmp_path: Path, field: str) -> None:
    options = {"cert_file": str(pki.client_cert), "key_file": str(pki.client_key)}
    missing = str(tmp_path / "missing.pem")
    options[field] = missing
    with pytest.raises(ConfigError) as caught:
        _context(**options)
    assert caught.value.path == f"tls.{field}"
    assert str(caught.value).startswith(f"tls.{field}: ")
    assert missing in str(caught.value)


def test_errors_name_the_fields_under_the_given_path(tmp_path: Path) -> None:
    options = parse_options(TlsOptions, {"required": True, "ca_file": str(tmp_path / "no")})
    with pytest.raises(ConfigError) as caught:
        ssl_context(options, path="routes.r.input.nats.tls")
    assert caught.value.path == "routes.r.input.nats.tls.ca_file"


def test_files_with_the_wrong_content_are_named(pki: Pki) -> None:
    with pytest.raises(ConfigError, match="no usable CA certificate") as caught:
        _context(ca_file=str(pki.client_key))
    assert caught.value.path == "tls.ca_file"
    with pytest.raises(ConfigError, match="no PEM certificate") as caught:
        _context(cert_file=str(pki.client_key), key_file=str(pki.client_key))
    assert caught.value.path == "tls.cert_file"
    with pytest.raises(ConfigError, match="does not match") as caught:
        _context(cert_file=str(pki.client_cert), key_file=str(pki.server_key))
    assert caught.value.path == "tls.key_file"
    with pytest.raises(ConfigError, match="no usable private key") as caught:
        _context(cert_file=str(pki.client_cert), key_file=str(pki.ca))
    assert caught.value.path == "tls.key_file"
