"""The registries of Python endpoints and middleware: names to factories.

A registered endpoint becomes an entry of the one endpoint registry
(`mq_bridge.endpoints.registry.ENDPOINT_MODULES`) whose module is made here: its options
accept any value (the factory checks its own config), and its builders call the factory.
So validation, `config_schema()`, `mq-bridge validate` and the route builder see it like a
built-in endpoint, and unregistering it removes it from all of them. The module's name
carries a generation number, so a name registered again is a new registry entry and no
cache keeps the old factory.

Registration is process-wide and thread-safe; register before building what names it.
"""

from __future__ import annotations

import itertools
import re
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from pydantic import RootModel

from mq_bridge.endpoints.base import BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.errors import ConfigError

__all__ = [
    "PythonEndpointOptions",
    "endpoint_factory",
    "middleware_factory",
    "register_endpoint",
    "register_middleware",
    "registered_endpoints",
    "registered_middlewares",
    "unregister_endpoint",
    "unregister_middleware",
]

Factory = Callable[[str, Any], Any]

#: Names as config keys: a letter or underscore, then letters, digits, ``_`` and ``-``.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
#: Keys an endpoint mapping already gives a meaning to.
_RESERVED = frozenset({"middlewares", "custom", "ref"})
_MODULE_PREFIX = "mq_bridge.endpoints.python.registered"

_lock = threading.Lock()
_endpoints: dict[str, Factory] = {}
_middlewares: dict[str, Factory] = {}
_generation = itertools.count(1)


class PythonEndpointOptions(RootModel[Any]):
    """Options of an endpoint registered from Python: any value, handed to its factory."""


def register_endpoint(name: str, factory: Factory) -> None:
    """Make `name` an endpoint type whose objects `factory(route_name, config)` returns.

    The object implements ``receive_batch(max_messages)`` to be an input and/or
    ``send_batch(messages)`` to be an output, plus optional ``commit(dispositions)`` and
    ``close()`` (see `mq_bridge.endpoints.python.adapters`). Registering a name twice
    raises `ConfigError` and keeps the first factory; so does a built-in endpoint's name.
    """
    _check(name, factory, "endpoint")
    with _lock:
        if name in _endpoints:
            raise ConfigError(
                f"an endpoint named {name!r} is registered already; call "
                f"mq_bridge.unregister_endpoint({name!r}) first to replace it"
            )
        if name in ENDPOINT_MODULES or name in _RESERVED:
            raise ConfigError(f"{name!r} is a built-in endpoint; register under another name")
        module = _endpoint_module(name)
        sys.modules[module.__name__] = module
        _endpoints[name] = factory
        ENDPOINT_MODULES[name] = module.__name__


def unregister_endpoint(name: str) -> bool:
    """Forget the endpoint registered as `name`: True if there was one.

    Routes already built keep the objects they have; new builds no longer find `name`.
    """
    with _lock:
        if _endpoints.pop(name, None) is None:
            return False
        module_name = ENDPOINT_MODULES.pop(name)
        sys.modules.pop(module_name, None)
        return True


def register_middleware(name: str, factory: Factory) -> None:
    """Make ``{"custom": {"name": name, "config": ...}}`` a middleware of any endpoint.

    `factory(route_name, config)` returns an object with ``on_receive(messages)`` (applies
    on inputs) and/or ``on_send(messages)`` (applies on outputs); each returns one item per
    message, the message (possibly rewritten) or None to drop it. Registering a name
    twice raises `ConfigError` and keeps the first factory.
    """
    _check(name, factory, "middleware")
    with _lock:
        if name in _middlewares:
            raise ConfigError(
                f"a middleware named {name!r} is registered already; call "
                f"mq_bridge.unregister_middleware({name!r}) first to replace it"
            )
        _middlewares[name] = factory


def unregister_middleware(name: str) -> bool:
    """Forget the middleware registered as `name`: True if there was one."""
    with _lock:
        return _middlewares.pop(name, None) is not None


def registered_endpoints() -> list[str]:
    """The names of the endpoints registered from Python, sorted."""
    with _lock:
        return sorted(_endpoints)


def registered_middlewares() -> list[str]:
    """The names of the middleware registered from Python, sorted."""
    with _lock:
        return sorted(_middlewares)


def endpoint_factory(name: str, path: str) -> Factory:
    """The factory registered as endpoint `name`; `ConfigError` at `path` when there is none."""
    with _lock:
        factory = _endpoints.get(name)
    if factory is None:
        raise ConfigError(_missing("endpoint", name, registered_endpoints()), path=path)
    return factory


def middleware_factory(name: str, path: str) -> Factory:
    """The factory registered as middleware `name`; `ConfigError` when there is none."""
    with _lock:
        factory = _middlewares.get(name)
    if factory is None:
        raise ConfigError(_missing("middleware", name, registered_middlewares()), path=path)
    return factory


def _missing(kind: str, name: str, registered: list[str]) -> str:
    known = ", ".join(registered) or "none"
    return (
        f"no {kind} named {name!r} is registered from Python "
        f"(mq_bridge.register_{kind}); registered: {known}"
    )


def _check(name: Any, factory: Any, kind: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"a {kind} name is a str, got {type(name).__name__}")
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{kind} name {name!r}: use a letter or underscore, then letters, digits, '_' "
            "or '-' (at most 100)"
        )
    if not callable(factory):
        raise TypeError(f"the {kind} factory must be callable, got {type(factory).__name__}")


def _endpoint_module(name: str) -> types.ModuleType:
    """The registry module of Python endpoint `name`: OPTIONS and both builders."""
    module = types.ModuleType(f"{_MODULE_PREFIX}.{name}_{next(_generation)}")
    module.__doc__ = f"{name}: an endpoint registered from Python (mq_bridge.register_endpoint)."
    module.OPTIONS = PythonEndpointOptions  # type: ignore[attr-defined]
    module.build_input = lambda options, context: build_input(name, options.root, context)  # type: ignore[attr-defined]
    module.build_output = lambda options, context: build_output(name, options.root, context)  # type: ignore[attr-defined]
    return module


def build_input(name: str, config: Any, context: BuildContext, path: str = "") -> InputEndpoint:
    """An input over the object that endpoint `name`'s factory makes for `config`; an
    unknown `name` is a `ConfigError` at `path` (default: the name)."""
    from mq_bridge.endpoints.python.adapters import PythonInput

    return PythonInput(name, _maker(name, config, context, path or name))


def build_output(name: str, config: Any, context: BuildContext, path: str = "") -> OutputEndpoint:
    """An output over the object that endpoint `name`'s factory makes for `config`."""
    from mq_bridge.endpoints.python.adapters import PythonOutput

    return PythonOutput(name, _maker(name, config, context, path or name))


def _maker(name: str, config: Any, context: BuildContext, path: str) -> Callable[[], Any]:
    factory = endpoint_factory(name, path)
    route_name = context.route_name
    arguments = {} if config is None else config
    return lambda: factory(route_name, arguments)
