"""The endpoint packages' layout: which registrations a package carries, and (below) the file
names an endpoint package may use: the five first-tier names, the fixed second-tier names
(docs/endpoints.md, "More files"), its registrations' modules, or a name listed here with
its reason.

A package that registers more than itself (redis: ``redis_streams`` and ``redis``; twain:
``sled``; memory: ``stream_buffer``) names every registration in its ``__init__``'s
``REGISTRATIONS``, so a reader of the package sees them all without opening the registry.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from tests.layering import SHARED_UNDER_ENDPOINTS

E = "mq_bridge.endpoints"
ENDPOINTS_DIR = Path(__file__).resolve().parent.parent / "src" / "mq_bridge" / "endpoints"


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


# -- the file names an endpoint package may use (docs/endpoints.md, "More files") ---------

#: The five files every endpoint package has (codec where there is a wire format).
FIRST_TIER = frozenset({"__init__.py", "options.py", "input.py", "output.py", "codec.py"})
#: The kit's names for the same roles in every endpoint that needs them.
SECOND_TIER = frozenset({"client.py", "fastpath.py", "wire.py", "replies.py", "readers.py"})
#: A folder of input variants (one module each): its files are the variants' names.
VARIANTS_FOLDER = "readers"

FASTPATH = "the hand-written protocol client; to be renamed fastpath.py"
CLIENT = "connections; to be renamed client.py"

#: endpoint -> {file: why it has a name of its own}. Only shrinks: a file renamed to a fixed
#: name, or gone, leaves the list (a test fails on a listed file that no longer exists).
OTHER_NAMES: dict[str, dict[str, str]] = {
    "amqp": {
        "connection.py": f"pika's SelectConnection on an I/O thread: {CLIENT}",
        "direct.py": FASTPATH,
        "frames.py": "the publish frames as bytes (pure framing); to be merged into wire.py",
        "publishing.py": "publisher confirms, pipelined: the output's in-flight bookkeeping",
        "settlement.py": "acks and nacks of one channel in any order, as few frames as possible",
        "topology.py": "declaring the exchange, the queue and their binding",
    },
    "aws": {
        "destinations.py": "finding the named queue or topic and its kind (FIFO or not)",
        "direct.py": FASTPATH,
        "reader.py": "the SQS long-poller behind the input (the input's one variant)",
    },
    "file": {"progress.py": "a consumer group's acknowledged offset, kept beside the file"},
    "grpc": {
        "batch_call.py": FASTPATH,
        "channel_options.py": "HTTP/2 and size settings as grpcio options, and TLS credentials",
        "loop.py": "the process's one asyncio loop for grpc.aio servers (grpcio binds it once)",
        "pending.py": "a published message waiting for the route to settle it",
        "proto.py": "the mqbridge.Bridge messages, declared and built at run time",
        "server.py": "the input in server_mode (a <mode> file)",
        "service.py": "the embedded mqbridge.Bridge server, one per listening address",
        "streams.py": "a topic's Subscribe streams and each consumer's unacknowledged messages",
        "subscriber.py": "the input as a Subscribe client (a <mode> file)",
    },
    "http": {
        "deadlines.py": "one timer for all of an input's request deadlines",
        "streaming.py": "streamed bodies split into SSE / NDJSON items (pure)",
    },
    "kafka": {"commits.py": "the offsets a group member acknowledged, committed cumulatively"},
    "memory": {
        "drainer.py": "MemoryDrainer: empties a topic fast, for benchmarks and tests",
        "topic.py": "the process-wide topics themselves (bounded FIFO and broadcast channels)",
    },
    "mongodb": {
        "changes.py": "the change-stream input (a <mode> file: change_stream)",
        "claims.py": "the work queue's claims: competing consumers never share a document",
        "direct.py": FASTPATH,
    },
    "mqtt": {"publisher.py": FASTPATH},
    "nats": {
        "connection.py": f"one nats-py connection per server, on the kit's loop: {CLIENT}",
        "direct.py": FASTPATH,
        "jetstream.py": "JetStream setup: the stream and the consumer, as mq-bridge makes them",
        "link.py": "picks the hand-written client or the nats-py one for each connection",
        "pull.py": "reading a JetStream pull consumer (a <mode> file)",
        "subscriber.py": "reading core NATS, no_jetstream (a <mode> file)",
    },
    "redis": {
        "channels.py": "the redis (pub/sub) registration's input and output",
        "commands.py": FASTPATH,
    },
    "sqlx": {
        "ahead.py": "claiming one batch ahead while the caller handles the last",
        "connection.py": f"SQLAlchemy's pool over psycopg / PyMySQL / sqlite3: {CLIENT}",
        "dialects.py": "the SQL per database, pure text",
        "held.py": "PostgreSQL delete_after_read: a claim held open until the ack (a <mode> file)",
        "listen.py": "listen_notify: the input wakes on an output's NOTIFY (a <mode> file)",
        "table.py": "the queue table: created when asked, its columns read at connect",
        "urls.py": "sqlx connection URLs -> SQLAlchemy URLs and driver arguments (pure)",
    },
    "switch": {"predicates.py": "the `when` expressions, parsed and checked with ast"},
    "twain": {"exactly_once.py": "exactly-once for a twain -> twain route of one store"},
    "zeromq": {
        "envelopes.py": "the json format's frame: a batch as a JSON array of envelopes (pure)",
        "sockets.py": "ZeroMQ sockets from the options, and the poller's waker",
    },
}


def endpoint_packages(endpoints: Path) -> list[Path]:
    """The endpoint packages under `endpoints` (the shared kit and python registry aside)."""
    return sorted(
        path
        for path in endpoints.iterdir()
        if (path / "__init__.py").is_file() and path.name not in SHARED_UNDER_ENDPOINTS
    )


def registration_files(package: Path) -> set[str]:
    """The files of `package` that are registrations of their own (its REGISTRATIONS)."""
    name = f"{E}.{package.name}"
    return {
        module.rpartition(".")[2] + ".py"
        for module in registrations_by_package().get(name, {}).values()
        if module != name
    }


def unexplained(endpoints: Path, listed: dict[str, dict[str, str]]) -> list[str]:
    """``endpoint/file`` for each name that is no fixed name, registration or listed one."""
    found = []
    for package in endpoint_packages(endpoints):
        known = FIRST_TIER | SECOND_TIER | set(listed.get(package.name, {}))
        known |= registration_files(package)
        for entry in sorted(package.iterdir()):
            if entry.name == "__pycache__" or (entry.name == VARIANTS_FOLDER and entry.is_dir()):
                continue
            name = f"{entry.name}/" if entry.is_dir() else entry.name
            if (entry.is_dir() or entry.suffix == ".py") and name not in known:
                found.append(f"{package.name}/{name}")
    return found


def test_every_file_of_an_endpoint_package_has_a_fixed_or_listed_name():
    found = unexplained(ENDPOINTS_DIR, OTHER_NAMES)
    assert not found, f"use a fixed name (docs/endpoints.md) or list it with a reason: {found}"


def test_every_listed_name_is_still_used():
    """A file renamed to a fixed name, or gone, leaves the list: it only shrinks."""
    stale = [
        f"{endpoint}/{name}"
        for endpoint, names in OTHER_NAMES.items()
        for name in names
        if not (ENDPOINTS_DIR / endpoint / name).exists()
    ]
    assert not stale


def test_every_listed_name_gives_a_one_line_reason():
    for names in OTHER_NAMES.values():
        assert all(reason.strip() and "\n" not in reason for reason in names.values())


def test_a_name_of_its_own_fails_until_listed(tmp_path):
    package = tmp_path / "kafka"
    (package / "readers").mkdir(parents=True)
    for name in ("__init__.py", "options.py", "client.py", "helpers.py", "readers/tail.py"):
        (package / name).write_text("")
    (package / "extras").mkdir()
    (tmp_path / "kit").mkdir()
    (tmp_path / "kit" / "__init__.py").write_text("")
    (tmp_path / "kit" / "anything.py").write_text("")
    assert unexplained(tmp_path, {}) == ["kafka/extras/", "kafka/helpers.py"]
    assert unexplained(tmp_path, {"kafka": {"extras/": "x", "helpers.py": "y"}}) == []
