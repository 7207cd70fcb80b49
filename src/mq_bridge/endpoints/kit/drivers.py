"""Optional client libraries ("drivers"): imported when an endpoint first needs one.

An endpoint module imports its driver inside its connect code, never at import time, so
the bridge loads without it and the error names the fix:

    nats = require_driver("nats", endpoint="nats", extra="nats", package="nats-py")
    # ConfigError: the nats endpoint needs the nats-py package: pip install 'twainmq[nats]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mq_bridge.errors import ConfigError

__all__ = ["DISTRIBUTION", "require_driver"]

#: The distribution whose extras install the drivers.
DISTRIBUTION = "twainmq"


def require_driver(
    module: str, *, endpoint: str, extra: str, package: str | None = None
) -> ModuleType:
    """Import `module` (a client library) for the `endpoint` endpoint.

    When it is not installed, `ConfigError` names the `package` (default: the top-level
    name of `module`) and the ``pip install 'twainmq[extra]'`` that installs it. When it
    is installed but fails to import (a missing dependency of its own), the error says so.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        package = package or module.partition(".")[0]
        install = f"pip install '{DISTRIBUTION}[{extra}]'"
        if _is_missing(module, error):
            message = f"the {endpoint} endpoint needs the {package} package: {install}"
        else:
            message = (
                f"the {endpoint} endpoint could not import the {package} package ({error}); "
                f"reinstalling it may help: {install}"
            )
        raise ConfigError(message) from error


def _is_missing(module: str, error: ImportError) -> bool:
    """Whether `error` says `module` itself (or a parent package of it) is not installed."""
    if not isinstance(error, ModuleNotFoundError) or error.name is None:
        return False
    return module == error.name or module.startswith(error.name + ".")
