"""The endpoint packages' layout: which registrations a package carries, and (below) the file
names an endpoint package may use.

A package that registers more than itself (redis: ``redis_streams`` and ``redis``; twain:
``sled``; memory: ``stream_buffer``) names every registration in its ``__init__``'s
``REGISTRATIONS``, so a reader of the package sees them all without opening the registry.
"""

from __future__ import annotations

import importlib

from mq_bridge.endpoints.registry import ENDPOINT_MODULES

E = "mq_bridge.endpoints"


def registrations_by_package() -> dict[str, dict[str, str]]:
    """package -> {config name: module} for the registry entries inside endpoint packages."""
    found: dict[str, dict[str, str]] = {}
    for name, module in ENDPOINT_MODULES.items():
        package = ".".join(module.split(".")[:3])
        found.setdefault(package, {})[name] = module
    return found


def test_a_package_with_more_than_itself_registered_names_every_registration():
    for package, registered in registrations_by_package().items():
        if list(registered.values()) == [package]:
            continue  # one registration, the package itself
        named = getattr(importlib.import_module(package), "REGISTRATIONS", None)
        assert named == registered, f"{package}.REGISTRATIONS should be {registered}"


def test_redis_names_both_its_registrations():
    both = {"redis_streams": f"{E}.redis.streams", "redis": f"{E}.redis.pubsub"}
    named = importlib.import_module(f"{E}.redis").REGISTRATIONS
    assert named == both
