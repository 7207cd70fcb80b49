"""Real brokers for tests: where each listens, how to start it, its fixture, and a restart.

A test that needs a broker takes its fixture (or calls `require_broker`)::

    def test_publish(nats_url: str) -> None:
        ...  # nats_url == "nats://127.0.0.1:4222"

When nothing answers on the broker's port the test is skipped with a reason that says how to
start it; under ``CI=true`` it fails instead, so a missing service cannot hide in CI.

=========  ==================  ==============================================================
name       fixture             started by
=========  ==================  ==============================================================
kafka      kafka_bootstrap     scripts/services.sh (Tansu, PID file in .services/)
mongodb    mongodb_url         scripts/services.sh (NX-27017)
sqs        sqs_endpoint        scripts/services.sh (moto server)
postgres   postgres_url        the machine (shared/BROKERS.md has its restart command)
mariadb    mysql_url           the machine
redis      redis_url           the machine
rabbitmq   amqp_url            the machine
mosquitto  mqtt_address        the machine
nats       nats_url            the machine
=========  ==================  ==============================================================

The services.sh servers listen on ``$TWAINMQ_KAFKA_PORT``, ``$TWAINMQ_MONGODB_PORT`` and
``$TWAINMQ_SQS_PORT`` when set (as services.sh reads them), so a run can use private copies.

`restart_broker` restarts one mid-test (to prove that a client reconnects) and leaves it
running; it fails unless the server really went down and a new process answers after it. A
services.sh server that something else started (no PID file of ours names the process on its
port) is left alone: `require_restartable` skips the test then (fails it under ``CI=true``).
Every session on the machine shares these servers: a test creates uniquely named
streams/queues/topics and deletes them, even when it fails.

tests/conftest.py registers this module as a pytest plugin, so the fixtures work everywhere.
"""

from __future__ import annotations

import difflib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parent.parent
SERVICES_SCRIPT = ROOT / "scripts" / "services.sh"


class Broker(NamedTuple):
    """Where a broker listens and how to start it (the first three fields are the table)."""

    host: str
    port: int
    #: how to start it, quoted in the skip reason (for the preinstalled: shared/BROKERS.md's
    #: restart command, which `scripts/services.sh start NAME` also runs)
    start: str
    #: what `require_broker` returns: the URL or address a client is given
    address: str
    #: True: installed and started by scripts/services.sh, which keeps its PID file
    managed: bool = False
    #: seconds to wait for it to stop, and then to accept connections again
    timeout: float = 30.0
    #: PostgreSQL's SIGTERM is a "smart" shutdown that waits for every client to leave
    stop_signal: signal.Signals = signal.SIGTERM


def managed_port(name: str, default: int) -> int:
    """The port of a services.sh server: ``$TWAINMQ_<NAME>_PORT`` as services.sh reads it."""
    variable = f"TWAINMQ_{name.upper()}_PORT"
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{variable}={text!r} is not a port number")
    return int(text)


KAFKA_PORT = managed_port("kafka", 9092)
MONGODB_PORT = managed_port("mongodb", 27017)
SQS_PORT = managed_port("sqs", 5000)

BROKERS: dict[str, Broker] = {
    "kafka": Broker(
        "127.0.0.1",
        KAFKA_PORT,
        "scripts/services.sh start kafka",
        f"127.0.0.1:{KAFKA_PORT}",
        managed=True,
    ),
    "mongodb": Broker(
        "127.0.0.1",
        MONGODB_PORT,
        "scripts/services.sh start mongodb",
        f"mongodb://127.0.0.1:{MONGODB_PORT}/",
        managed=True,
    ),
    "sqs": Broker(
        "127.0.0.1",
        SQS_PORT,
        "scripts/services.sh start sqs",
        f"http://127.0.0.1:{SQS_PORT}",
        managed=True,
    ),
    "postgres": Broker(
        "127.0.0.1",
        5432,
        "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
        "postgresql://postgres@127.0.0.1:5432/postgres",
        stop_signal=signal.SIGINT,
    ),
    "mariadb": Broker(
        "127.0.0.1",
        3306,
        "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
        "mysql://root@127.0.0.1:3306/test",
    ),
    "redis": Broker(
        "127.0.0.1",
        6379,
        'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" '
        "--appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log",
        "redis://127.0.0.1:6379",
    ),
    "rabbitmq": Broker(
        "127.0.0.1",
        5672,
        "rabbitmq-server -detached",
        "amqp://guest:guest@127.0.0.1:5672/",
        timeout=60.0,  # BROKERS.md: the slowest to start
    ),
    "mosquitto": Broker(
        "127.0.0.1", 1883, "mosquitto -d -c /etc/mosquitto/mosquitto.conf", "127.0.0.1:1883"
    ),
    "nats": Broker(
        "127.0.0.1",
        4222,
        "start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- "
        "-a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log",
        "nats://127.0.0.1:4222",
    ),
}

#: The pytest markers' names for the brokers that are named after their server here.
ALIASES = {"amqp": "rabbitmq", "mqtt": "mosquitto", "mysql": "mariadb"}


def canonical_name(name: str) -> str:
    """`name` as a key of `BROKERS` (markers' names are accepted too: amqp, mqtt, mysql)."""
    name = ALIASES.get(name, name)
    if name not in BROKERS:
        close = difflib.get_close_matches(name, [*BROKERS, *ALIASES], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown broker {name!r}{hint} (known: {', '.join(BROKERS)})")
    return name


def state_dir() -> Path:
    """Where scripts/services.sh keeps its venv, PID files and logs."""
    return Path(os.environ.get("TWAINMQ_SERVICES_DIR") or ROOT / ".services").resolve()


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def is_reachable(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something accepts a TCP connection on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def how_to_start(name: str) -> str:
    broker = BROKERS[canonical_name(name)]
    if broker.managed:
        return broker.start
    return f"{broker.start}  (or: scripts/services.sh start {canonical_name(name)})"


def require_broker(name: str) -> str:
    """The broker's address when it answers; otherwise skip the test (fail it when CI=true)."""
    name = canonical_name(name)
    broker = BROKERS[name]
    if is_reachable(broker.host, broker.port):
        return broker.address
    reason = (
        f"{name}: nothing answers on {broker.host}:{broker.port}; start it: {how_to_start(name)}"
    )
    if in_ci():
        pytest.fail(f"{reason} [CI=true: a missing service fails, never skips]", pytrace=False)
    pytest.skip(reason)


def broker_address(name: str) -> Any:
    """A fixture that returns `require_broker(name)`: ``nats_url = broker_address("nats")``."""

    def address() -> str:
        return require_broker(name)

    address.__doc__ = f"The address of {name}; skips (fails under CI=true) when it is down."
    return pytest.fixture(address)


kafka_bootstrap = broker_address("kafka")
mongodb_url = broker_address("mongodb")
sqs_endpoint = broker_address("sqs")
postgres_url = broker_address("postgres")
mysql_url = broker_address("mariadb")
redis_url = broker_address("redis")
amqp_url = broker_address("rabbitmq")
mqtt_address = broker_address("mosquitto")
nats_url = broker_address("nats")


# --- finding a server by its listening port (never by its name) ---------------------------


def listening_inodes(port: int) -> set[str]:
    """The inodes of the TCP sockets in LISTEN state on `port` (IPv4 and IPv6)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port and inode != "0":
                inodes.add(inode)
    return inodes


def listening_pids(port: int) -> set[int]:
    """The PIDs of the processes that hold a listening socket on `port`."""
    sockets = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    pids: set[int] = set()
    if not sockets:
        return pids
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in sockets for fd in (proc / "fd").iterdir()):
                pids.add(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return pids


def process_alive(pid: int) -> bool:
    """True while `pid` runs (an exited process that nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def parent_pid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


# --- starting and restarting --------------------------------------------------------------


def start_broker(name: str) -> None:
    """Make sure the broker runs: ``scripts/services.sh start NAME`` when it is unreachable."""
    name = canonical_name(name)
    broker = BROKERS[name]
    if is_reachable(broker.host, broker.port):
        return
    done = subprocess.run(
        ["bash", str(SERVICES_SCRIPT), "start", name],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=broker.timeout + 60,
    )
    if done.returncode != 0 or not is_reachable(broker.host, broker.port):
        raise RuntimeError(f"could not start {name}:\n{done.stdout}{done.stderr}")


class NotRestartableError(RuntimeError):
    """`restart_broker` cannot restart this server (it was not started by scripts/services.sh)."""


def managed_pid(name: str) -> int:
    """The live PID in the server's PID file, which must be the process listening on the
    broker's port; else `NotRestartableError`, saying why."""
    broker = BROKERS[name]
    pid_file = state_dir() / f"{name}.pid"
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        pid = 0
    if not pid or not process_alive(pid):
        raise NotRestartableError(
            f"{name} was not started by scripts/services.sh from {state_dir()} (no live PID in "
            f"{pid_file}), so restart_broker leaves it alone"
        )
    listening = listening_pids(broker.port)
    if pid not in listening:
        raise NotRestartableError(
            f"{name} was not started by scripts/services.sh from {state_dir()}: its PID file "
            f"names pid {pid}, but port {broker.port} is held by {sorted(listening) or 'nobody'} "
            f"(a private server? set TWAINMQ_{name.upper()}_PORT to its port), so restart_broker "
            "leaves it alone"
        )
    return pid


def require_restartable(name: str) -> None:
    """Skip the test unless the broker runs and `restart_broker(name)` can restart it (not a
    services.sh server that something else started); under ``CI=true`` fail it instead.

    A test that restarts a broker calls this first, so that it skips before doing any work.
    """
    require_broker(name)
    skip_unless_managed_here(canonical_name(name))


def skip_unless_managed_here(name: str) -> None:
    if not BROKERS[name].managed:
        return
    try:
        managed_pid(name)
    except NotRestartableError as error:
        if in_ci():
            pytest.fail(f"{error} [CI=true: .ci/run starts it with services.sh]", pytrace=False)
        pytest.skip(str(error))


def stop_managed(name: str) -> None:
    done = subprocess.run(
        ["bash", str(SERVICES_SCRIPT), "stop", name],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"could not stop {name}:\n{done.stdout}{done.stderr}")


def stop_preinstalled(name: str) -> None:
    """Signal the process that listens on the broker's port, and wait until it has exited."""
    broker = BROKERS[name]
    pids = listening_pids(broker.port)
    if not pids:
        raise RuntimeError(f"{name}: no process listens on port {broker.port}")
    # Children that inherited the socket follow their parent: signal the top ones only.
    for pid in {pid for pid in pids if parent_pid(pid) not in pids}:
        os.kill(pid, broker.stop_signal)
    wait_until(
        lambda: not any(map(process_alive, pids)) and not listening_inodes(broker.port),
        broker.timeout,
        step=0.05,
        failing=f"{name} (pids {sorted(pids)}) did not exit after {broker.stop_signal.name}",
    )


def restart_broker(name: str, down_seconds: float = 0.0) -> None:
    """Stop a local broker, keep it down for `down_seconds`, start it and wait until it answers.

    The services.sh servers (kafka, mongodb, sqs) are stopped through their PID file; the
    preinstalled ones through the PID that holds their listening port. Either way the broker
    is started again before this returns or raises. Kafka/MongoDB/SQS keep their data in
    memory, and so does Redis: a restart empties them.

    A restart that did not happen fails: the processes that listened on the port must have
    exited with nothing left listening, and a new process must listen there afterwards. A
    services.sh server that something else started is not touched: the test is skipped
    (fails under ``CI=true``), as `require_restartable` does.
    """
    name = canonical_name(name)
    broker = BROKERS[name]
    skip_unless_managed_here(name)  # before anything is touched
    before = listening_pids(broker.port)
    if not before:
        raise RuntimeError(f"{name}: no process listens on port {broker.port} to restart")
    try:
        if broker.managed:
            stop_managed(name)
        else:
            stop_preinstalled(name)
        wait_until(
            lambda: not any(map(process_alive, before)) and not listening_inodes(broker.port),
            broker.timeout,
            step=0.05,
            failing=f"{name} did not go down: pids {sorted(before)} or a listener on port "
            f"{broker.port} remain after the stop",
        )
        time.sleep(down_seconds)
    finally:
        start_broker(name)
    wait_until(
        lambda: is_reachable(broker.host, broker.port),
        broker.timeout,
        step=0.05,
        failing=f"{name} does not accept connections on {broker.host}:{broker.port}",
    )
    check_restarted(name, before)


def check_restarted(name: str, before: set[int]) -> None:
    """Fail unless a new process (none of `before`) listens on the broker's port, and, for a
    services.sh server, it is the one its PID file names."""
    broker = BROKERS[name]
    after = listening_pids(broker.port)
    if not after or after & before:
        raise AssertionError(
            f"{name} was not restarted: port {broker.port} was held by {sorted(before)}, "
            f"now by {sorted(after) or 'nobody'}"
        )
    if broker.managed:
        pid = managed_pid(name)
        assert pid in after, f"{name}: the PID file names {pid}, port {broker.port} {after}"
