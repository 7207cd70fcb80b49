"""Config documents for mq_bridge: schema, loading, validation and typed shapes.

`config_schema()` is the JSON Schema of a document, assembled from the registered
endpoint and middleware modules. The ``TypedDict`` s re-exported here (``ConfigDocument``,
``RouteConfig``, ``EndpointConfig``, one per endpoint and middleware) are generated from
it by ``scripts/gen_config_types.py``; a test fails when they drift.
"""

import importlib
from typing import TYPE_CHECKING, Any

from mq_bridge.config.redaction import redact as redact

if TYPE_CHECKING:
    from mq_bridge.config.types import *  # noqa: F403


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__")})


def __getattr__(name: str) -> Any:
    # The TypedDicts load on first use: `import mq_bridge` does not need them.
    types = importlib.import_module("mq_bridge.config.types")
    if name == "__all__":
        return ["config_schema", "redact", *types.__all__]
    if name in types.__all__:
        return getattr(types, name)
    raise AttributeError(f"module 'mq_bridge.config' has no attribute {name!r}")


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a config document, as a fresh dict."""
    from mq_bridge.config.schema import config_schema as build  # loads every declaration

    return build()
