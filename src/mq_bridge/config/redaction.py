"""Keep secrets out of logs, reprs and error messages.

A value is secret when its option is declared secret (`secret_field` in an endpoint's or
middleware's declaration: ``writeOnly`` in the schema), when its key looks like a
credential (``password``, ``secret``, ``token``, ``api_key``, ``sasl_...``) or when it is
a URL carrying ``user:password@``.
`redact` returns a copy of a config with those values replaced by ``***``; the runtime
uses it for every repr and log line that shows config.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "is_secret_key", "redact", "redact_text"]

REDACTED = "***"

_SECRET_WORDS = {"password", "passwd", "pass", "secret", "token", "credentials", "credential"}
_SECRET_KEY_NAMES = {"key", "apikey", "api_key", "access_key", "secret_key", "private_key"}
#: ``..._key`` options that name a key rather than hold one.
_PLAIN_KEYS = ("metadata_key", "partition_key", "routing_key", "sort_key", "message_key")
#: A scheme is at most 64 characters here: with no bound, a long run of letters without
#: ``://`` is scanned again from each of its characters (70,000 of them: 12 s).
_URL_PASSWORD = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,63}://)(?P<user>[^:/@\s]*):[^@/\s]*@"
)


def is_secret_key(key: object) -> bool:
    """Whether a config key names a credential (its value must never be shown)."""
    if not isinstance(key, str):
        return False
    if key in declared_secret_keys():
        return True
    name = key.lower().replace("-", "_")
    words = set(name.split("_"))
    if words & _SECRET_WORDS or name in _SECRET_KEY_NAMES or name.startswith("sasl"):
        return True
    return name.endswith(("_key", "apikey")) and not name.endswith(_PLAIN_KEYS)


def declared_secret_keys() -> frozenset[str]:
    """The option names that some registered declaration marks secret."""
    from mq_bridge.config.schema import declared_secret_keys as collect  # avoids a cycle

    return collect()


def redact_text(text: str) -> str:
    """`text` with the password of every ``scheme://user:password@`` URL hidden."""
    return _URL_PASSWORD.sub(rf"\g<scheme>\g<user>:{REDACTED}@", text)


def redact(config: Any) -> Any:
    """A copy of `config` with secret values replaced by ``***`` (the input is untouched)."""
    if isinstance(config, Mapping):
        return {
            key: REDACTED if is_secret_key(key) and value is not None else redact(value)
            for key, value in config.items()
        }
    if isinstance(config, (list, tuple)):
        return [redact(item) for item in config]
    if isinstance(config, str):
        return redact_text(config)
    return config
