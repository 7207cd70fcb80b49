"""The layering rules hold for src/, and each rule fails on a violation planted in a small tree.

The rules (checked by tests/layering.py, read from the source with `ast`):

- an endpoint imports no other endpoint, and nothing under endpoints/ imports
  ``mq_bridge.runtime``, ``mq_bridge.middleware`` or ``mq_bridge.cli``;
- mq_bridge imports only twainmq's public modules (``twainmq``, ``twainmq.admin``);
- twainmq imports nothing of mq_bridge;
- no import cycle among mq_bridge's modules (imports inside functions do not count);
- no ``obj._private`` read of another object's private attribute.

What breaks a rule today and cannot be fixed here is listed below with its reason.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.layering import (
    Violation,
    all_violations,
    cycle_violations,
    endpoint_violations,
    engine_violations,
    not_allowed,
    private_access_violations,
    read_tree,
)

SRC = Path(__file__).resolve().parent.parent / "src"
E = "mq_bridge.endpoints"

#: (rule, module, what it imports) -> why it is allowed for now.
ALLOWED_IMPORTS: dict[tuple[str, str, str], str] = {}

#: (module, owner._name) -> the driver version it was written against, and why.
ALLOWED_PRIVATE_READS = {
    ("mq_bridge.console.app", "site._server"): (
        "aiohttp 3.14.5: TCPSite keeps its bound sockets only there (port 0 -> the real port)"
    ),
    ("mq_bridge.endpoints.grpc.batch_call", "channel._channel"): (
        "grpcio 1.85.4: the cygrpc channel, for one segregated streaming call per batch"
    ),
    ("mq_bridge.endpoints.kafka.commits", "confluent().KafkaError._NO_OFFSET"): (
        "confluent-kafka 2.16.2: librdkafka's internal codes keep the underscore"
    ),
    ("mq_bridge.endpoints.nats.connection", "subscription._id"): (
        "nats-py 2.16.0: the sid the client's dispatch keys its messages by"
    ),
    ("mq_bridge.endpoints.redis.commands", "connection._sock"): (
        "redis 8.2.0: the socket under a pooled connection, for pipelined raw writes"
    ),
}


def allowed() -> set[tuple[str, str, str]]:
    reads = {("private-access", module, read) for module, read in ALLOWED_PRIVATE_READS}
    return set(ALLOWED_IMPORTS) | reads


@pytest.fixture(scope="module")
def source_tree():
    return read_tree(SRC)


def test_src_keeps_every_layering_rule(source_tree):
    found = not_allowed(all_violations(source_tree), allowed())
    assert not found, "\n".join(map(str, found))


def test_every_allowance_is_still_needed(source_tree):
    """An entry whose violation is gone is removed, so the lists only shrink."""
    seen = {(v.rule, v.module, v.detail) for v in all_violations(source_tree)}
    assert allowed() - seen == set()


def test_every_allowance_gives_its_reason():
    for reason in ALLOWED_IMPORTS.values():
        assert "issue 24" in reason
    for reason in ALLOWED_PRIVATE_READS.values():
        name, _, version = reason.partition(":")[0].rpartition(" ")
        assert name and version[0].isdigit(), f"{reason!r} names no driver version"


def test_the_checker_reads_the_whole_tree(source_tree):
    assert {"twainmq", "twainmq.admin", "mq_bridge", f"{E}.kit", f"{E}.kafka.input"} <= set(
        source_tree
    )


# -- each rule, seen failing on a planted tree --------------------------------------------


def plant(root: Path, files: dict[str, str]) -> dict:
    """A tree under `root` with `files` (path -> source) and the packages' ``__init__``s."""
    for relative, source in files.items():
        path = root / relative
        for package in [path.parent, *path.parent.parents]:
            if package == root:
                break
            package.mkdir(parents=True, exist_ok=True)
            (package / "__init__.py").touch()
        path.write_text(textwrap.dedent(source))
    return read_tree(root)


def details(violations: list[Violation]) -> set[tuple[str, str, str]]:
    return {(v.rule, v.module, v.detail) for v in violations}


def test_an_endpoint_importing_another_endpoint_fails(tmp_path):
    tree = plant(
        tmp_path,
        {
            "mq_bridge/endpoints/kafka/input.py": "from mq_bridge.endpoints.http import server\n",
            "mq_bridge/endpoints/http/server.py": "from ..kit import wire\n",
            "mq_bridge/endpoints/kit/wire.py": "",
            "mq_bridge/endpoints/sled.py": (
                "def build():\n    from mq_bridge.endpoints.twain.input import TwainInput\n"
            ),
            "mq_bridge/endpoints/twain/input.py": "from mq_bridge.endpoints.base import Batch\n",
            "mq_bridge/endpoints/base.py": "",
        },
    )
    assert details(endpoint_violations(tree)) == {
        ("endpoint", f"{E}.kafka.input", f"{E}.http"),
        ("endpoint", f"{E}.sled", f"{E}.twain"),  # a lazy import is a dependency too
    }


@pytest.mark.parametrize("above", ["runtime.delivery", "middleware.retry", "cli"])
def test_anything_under_endpoints_importing_what_runs_it_fails(tmp_path, above):
    tree = plant(
        tmp_path,
        {
            "mq_bridge/endpoints/kit/backoff.py": f"import mq_bridge.{above}\n",
            f"mq_bridge/{above.replace('.', '/')}.py": "",
        },
    )
    found = details(endpoint_violations(tree))
    assert found == {("above", f"{E}.kit.backoff", f"mq_bridge.{above}")}


def test_the_bridge_importing_a_private_twainmq_module_fails(tmp_path):
    tree = plant(
        tmp_path,
        {
            "mq_bridge/console/views.py": (
                "from twainmq import Twain\n"
                "from twainmq.admin import describe_group\n"
                "from twainmq.groups import commits\n"
            ),
            "twainmq/admin.py": "",
            "twainmq/groups/commits.py": "",
        },
    )
    assert details(engine_violations(tree)) == {
        ("private-twainmq", "mq_bridge.console.views", "twainmq.groups.commits")
    }


def test_twainmq_importing_the_bridge_fails(tmp_path):
    tree = plant(
        tmp_path,
        {
            "twainmq/reader.py": "if True:\n    import mq_bridge.message\n",
            "mq_bridge/message.py": "",
        },
    )
    assert details(engine_violations(tree)) == {("engine", "twainmq.reader", "mq_bridge.message")}


def test_a_module_level_cycle_fails_and_a_lazy_import_does_not_make_one(tmp_path):
    tree = plant(
        tmp_path,
        {
            "mq_bridge/config/schema.py": (
                "from mq_bridge.config.declarations import Options\n"
                "from mq_bridge.config import redaction\n"
            ),
            "mq_bridge/config/declarations.py": "from mq_bridge.config import schema\n",
            "mq_bridge/config/redaction.py": (
                "from mq_bridge import errors\n"
                "def keys():\n    from mq_bridge.config.schema import secret_keys\n"
            ),
            "mq_bridge/errors.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from mq_bridge.config.redaction import keys\n"
            ),
        },
    )
    # Counted, the lazy import would join redaction to the cycle, and the TYPE_CHECKING
    # one would make errors <-> redaction a second cycle.
    (cycle,) = cycle_violations(tree)
    assert cycle.detail == "mq_bridge.config.declarations <-> mq_bridge.config.schema"


def test_a_cycle_through_a_package_init_fails(tmp_path):
    tree = plant(
        tmp_path,
        {
            "mq_bridge/config/__init__.py": "from mq_bridge.config.redaction import redact\n",
            "mq_bridge/config/redaction.py": "from mq_bridge.middleware.base import Middleware\n",
            "mq_bridge/middleware/base.py": "from mq_bridge.config.declarations import Options\n",
            "mq_bridge/config/declarations.py": "",
        },
    )
    (cycle,) = cycle_violations(tree)
    assert cycle.detail == " <-> ".join(
        ["mq_bridge.config", "mq_bridge.config.redaction", "mq_bridge.middleware.base"]
    )


def test_reading_another_objects_private_attribute_fails(tmp_path):
    source = """\
        import os
        from collections import namedtuple


        class Route:
            _registry = {}

            def __init__(self, publisher):
                self._publisher = publisher

            def send(self, message):
                self._publisher.flush()            # self._x: fine
                other = Route(None)
                other._publisher                   # defined in this module: fine
                Route._registry                    # likewise
                super()._hook()                    # the base class's hook: fine
                namedtuple("P", "a")(1)._replace(a=2)  # public despite the underscore
                self._publisher._try_send(message) # another object's private: fails
                os._exit(0)

            @classmethod
            def make(cls):
                return cls._registry
        """
    tree = plant(tmp_path, {"mq_bridge/route.py": source})
    assert details(private_access_violations(tree)) == {
        ("private-access", "mq_bridge.route", "self._publisher._try_send")
    }


def test_an_allowance_covers_only_its_own_entry(tmp_path):
    tree = plant(
        tmp_path,
        {"mq_bridge/endpoints/redis/commands.py": "def f(c):\n    return c._sock, c._pool\n"},
    )
    left = not_allowed(
        private_access_violations(tree),
        {("private-access", f"{E}.redis.commands", "c._sock")},
    )
    assert details(left) == {("private-access", f"{E}.redis.commands", "c._pool")}
