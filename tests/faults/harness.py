"""The fault suite's harness: the route process, the numbered producer, the sink, the figures.

One case, on a timeline::

    producer  n=0,1,2 ... (every send that returned is "acknowledged at the source") ...... stop
    route     mq-bridge run faults.yaml --handler tests.faults.handlers:pass_through ...... TERM
    broker    up ......... down (SIGTERM, ~3 s) ......... up (t_up)
    [kill]                   once the route delivered again: kill -9 it, run a new one
    sink      counts each number it reads, and when it first saw it ....... drained: lost == 0?

- `RouteProcess` is a real ``mq-bridge run`` subprocess (the console script, from the repo
  root so ``tests.faults.handlers`` imports), its stdout and stderr in a log file; `kill`
  sends SIGKILL to its process group.
- `NumberedProducer` sends ``b"<n>"`` one message at a time at a steady rate through a
  `Publisher`. A send that raises (the broker is down) is sent again, with the same id, until
  it returns; only then is ``n`` acknowledged and the next number sent.
- `Sink` polls a `Consumer` and commits, counting every number it reads; a poll that raises
  (its broker is restarting) is retried, and a consumer that keeps failing is opened anew.
- `Figures` are what a case reports: acknowledged at the source, received, lost, duplicates,
  and the seconds from the broker accepting connections again (t_up) until the first message
  sent during or after the outage reached the sink. They are printed, put in the assertion
  message, and appended as JSON lines to ``$FAULTS_REPORT`` when it is set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

import yaml

from mq_bridge import Consumer, Message, Publisher

ROOT = Path(__file__).resolve().parents[2]
HANDLER = "tests.faults.handlers:pass_through"
#: A producer or sink that failed this long in a row opens its client anew.
REOPEN_AFTER = 2.0

T = TypeVar("T")


def retrying(call: Callable[[], T], seconds: float, pause: float = 0.2) -> T:
    """`call()` until it returns, for up to `seconds` (then its error)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(pause)


def close_quietly(closable: Any) -> None:
    try:
        closable.close()
    except Exception:
        pass


def route_file(path: Path, input: dict[str, Any], output: dict[str, Any], **options: Any) -> Path:
    """A config file with one route, ``faults``: no middleware, only route options."""
    route = {"input": input, "output": output, "batch_size": 100}
    route["reconnect_interval_ms"] = 500  # the backoff cap: a broker back is used within 0.5 s
    route.update(options)
    path.write_text(yaml.safe_dump({"routes": {"faults": route}}, sort_keys=False))
    return path


class RouteProcess:
    """``mq-bridge run CONFIG --handler tests.faults.handlers:pass_through`` (or `handler`;
    None: no handler stage), with `arguments` and `environment` added."""

    def __init__(
        self,
        config: Path,
        log: Path,
        handler: str | None = HANDLER,
        arguments: tuple[str, ...] = (),
        environment: dict[str, str] | None = None,
    ) -> None:
        script = Path(sys.executable).with_name("mq-bridge")
        program = [str(script)] if script.exists() else [sys.executable, "-m", "mq_bridge"]
        command = [*program, "run", str(config), "--progress-interval", "1", *arguments]
        if handler is not None:  # None: the route forwards unchanged, with no handler stage
            command += ["--handler", handler]
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=ROOT,
                start_new_session=True, env={**os.environ, **(environment or {})},
            )  # fmt: skip
        self.ended_by_itself: int | None = None  # its exit status, if it ended unasked
        self.killed = False

    def alive(self) -> bool:
        if self.process.poll() is None:
            return True
        if self.ended_by_itself is None and not self.killed:
            self.ended_by_itself = self.process.returncode
        return False

    def kill(self) -> None:
        """kill -9 (its process group): no cleanup, nothing flushed or acknowledged."""
        if self.alive():
            self.killed = True
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def logged(self, text: str) -> bool:
        """Whether the route's log has `text` (the route must still run)."""
        assert self.alive(), f"the route ended by itself\n{self.tail()}"
        return text in self.log.read_text(errors="replace")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (finish what is in flight), SIGKILL after `timeout`; the exit status.
        It waits for the route's first line first: a SIGTERM before `run` installed its
        handler would end it as a plain kill."""
        deadline = time.monotonic() + timeout
        while self.alive() and not self.log.stat().st_size and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive():
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.wait(10)

    def tail(self, lines: int = 25) -> str:
        text = self.log.read_text(errors="replace").replace("\r", "\n")
        kept = [line for line in text.splitlines() if line.strip()]
        return f"--- {self.log.name} (last {lines} lines)\n" + "\n".join(kept[-lines:])


class _Worker(threading.Thread):
    """A daemon thread with a stop flag and a tally of the errors it retried."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        self.errors: Counter[str] = Counter()
        self.reopened = 0

    def note(self, error: Exception) -> None:
        self.errors[f"{type(error).__name__}: {str(error)[:120]}"] += 1

    def stop(self) -> None:
        self.stopping.set()
        if self.ident is not None:  # a case that failed before starting it: nothing to join
            self.join(30)


class NumberedProducer(_Worker):
    """Sends 0, 1, 2, ... at `rate` a second; `acked` holds the numbers whose send returned."""

    def __init__(self, config: dict[str, Any], rate: float) -> None:
        super().__init__("faults-producer")
        self.config, self.interval = config, 1.0 / rate
        self.acked: list[int] = []
        self.next_number = 0
        self.acked_at: list[float] = []
        self.ids: dict[int, str] = {}  # number -> its message id, as 32 hex digits

    def run(self) -> None:
        publisher: Publisher | None = None
        due = time.monotonic()
        message = self._numbered(0)
        failing_since: float | None = None
        while not self.stopping.is_set():
            try:
                publisher = publisher or Publisher.from_config(self.config)
                publisher.send(message)
            except Exception as error:
                self.note(error)
                now = time.monotonic()
                failing_since = failing_since or now
                if publisher is not None and now - failing_since > REOPEN_AFTER:
                    close_quietly(publisher)
                    publisher, failing_since = None, None
                    self.reopened += 1
                self.stopping.wait(0.05)
                continue
            failing_since = None
            self.acked.append(self.next_number)
            self.acked_at.append(time.monotonic())
            self.next_number += 1
            message = self._numbered(self.next_number)
            due = max(due + self.interval, time.monotonic() - 1.0)
            self.stopping.wait(max(0.0, due - time.monotonic()))
        if publisher is not None:
            close_quietly(publisher)

    def _numbered(self, number: int) -> Message:
        identity = uuid.uuid4()
        self.ids[number] = identity.hex
        return Message(b"%d" % number, id=identity)

    def acked_since(self, moment: float) -> int:
        return sum(1 for at in self.acked_at if at >= moment)


class Sink(_Worker):
    """Reads numbers from a `Consumer` and commits; `seen` counts them, `first_seen` times."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__("faults-sink")
        self.config = config
        self.seen: Counter[int] = Counter()
        self.first_seen: dict[int, float] = {}
        self.last_new = time.monotonic()
        self.foreign: list[bytes] = []
        # The test's thread reads what this one counts: a copy made while a count changes
        # raised "dictionary changed size during iteration" (a GC pass mid-copy can run
        # other threads), so both sides take this lock.
        self._counting = threading.Lock()

    def arrivals(self) -> dict[int, float]:
        """A copy of `first_seen`: number -> when it first arrived."""
        with self._counting:
            return dict(self.first_seen)

    def counts(self) -> Counter[int]:
        """A copy of `seen`: number -> how often it arrived."""
        with self._counting:
            return Counter(self.seen)

    def run(self) -> None:
        consumer: Consumer | None = None
        failing_since: float | None = None
        while not self.stopping.is_set():
            try:
                consumer = consumer or Consumer.from_config(self.config)
                batch = consumer.poll(max=500, timeout_ms=200)
                self._count(batch)
                consumer.commit()
                failing_since = None
            except Exception as error:
                self.note(error)
                now = time.monotonic()
                failing_since = failing_since or now
                if consumer is not None and now - failing_since > REOPEN_AFTER:
                    close_quietly(consumer)
                    consumer, failing_since = None, None
                    self.reopened += 1
                self.stopping.wait(0.1)
        if consumer is not None:
            close_quietly(consumer)

    def _count(self, batch: list[Message]) -> None:
        with self._counting:
            self._count_locked(batch)

    def _count_locked(self, batch: list[Message]) -> None:
        now = time.monotonic()
        for message in batch:
            try:
                number = int(message.payload)
            except ValueError:
                self.foreign.append(message.payload[:80])
                continue
            if number not in self.first_seen:
                self.first_seen[number] = now
                self.last_new = now
            self.seen[number] += 1


class Sent(NamedTuple):
    """A number acknowledged at the source: its message id (32 hex digits) and when its send
    returned (time.monotonic)."""

    id: str
    acked_at: float


@dataclass
class Figures:
    """What one case measured (the JSON lines record of $FAULTS_REPORT)."""

    scenario: str
    acknowledged: int = 0
    received: int = 0
    lost: int = 0
    duplicates: int = 0
    #: acknowledged, then lost by the broker itself (not counted in `lost`; see Side.lost_by_broker)
    broker_lost: int = 0
    recovery_seconds: float | None = None
    outage_seconds: float = 0.0
    route_killed: bool = False
    #: killed cases: whether the first route delivered again by itself before its kill -9
    recovered_before_kill: bool | None = None
    route_exits: list[int] = field(default_factory=list)  # routes that ended unasked: status
    final_status: int | None = None  # the last route's exit status after SIGTERM (3: dropped)
    lost_examples: list[int] = field(default_factory=list)
    producer_errors: dict[str, int] = field(default_factory=dict)
    sink_errors: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    code: str = ""

    def line(self) -> str:
        recovery = "never" if self.recovery_seconds is None else f"{self.recovery_seconds:.2f}s"
        killed = ", route killed -9 and run again" if self.route_killed else ""
        if self.recovered_before_kill is False:
            killed = ", route killed -9 (had not recovered within 15s) and run again"
        if self.broker_lost:
            killed += f", {self.broker_lost} more lost by the broker itself"
        ended = f", route(s) ended unasked with {self.route_exits}" if self.route_exits else ""
        return (
            f"{self.scenario}: acknowledged {self.acknowledged}, received {self.received}, "
            f"lost {self.lost}, duplicates {self.duplicates}, recovered in {recovery} "
            f"(outage {self.outage_seconds:.1f}s{killed}{ended})"
        )


def measure(
    scenario: str,
    producer: NumberedProducer,
    sink: Sink,
    t_up: float,
    first_after: int,
    broker_lost: Callable[[dict[int, Sent]], set[int]] = lambda missing: set(),
) -> Figures:
    """The figures: `first_after` is the first number sent once the broker was going down;
    `broker_lost` picks, from the missing numbers, those the broker itself lost."""
    acked = set(producer.acked)
    seen, first_seen = sink.counts(), sink.arrivals()
    received = set(seen)
    missing = acked - received
    sent = {n: Sent(producer.ids[n], producer.acked_at[n]) for n in missing}
    by_broker = broker_lost(sent) if missing else set()
    lost = sorted(missing - by_broker)
    arrivals = [at for n, at in first_seen.items() if n >= first_after and at >= t_up]
    return Figures(
        scenario=scenario,
        acknowledged=len(acked),
        received=len(received & acked),
        lost=len(lost),
        duplicates=sum(count - 1 for count in seen.values()),
        broker_lost=len(by_broker),
        recovery_seconds=round(min(arrivals) - t_up, 3) if arrivals else None,
        lost_examples=lost[:10],
        producer_errors=dict(producer.errors.most_common(5)),
        sink_errors=dict(sink.errors.most_common(5)),
        code=code_version(),
    )


def drain(producer: NumberedProducer, sink: Sink, timeout: float, stall: float) -> None:
    """Wait until the sink saw every acknowledged number, nothing new came for `stall`
    seconds, or `timeout` passed."""
    acked = set(producer.acked)
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline:
        if acked <= sink.arrivals().keys():
            return
        if time.monotonic() - max(sink.last_new, started) > stall:
            return
        time.sleep(0.1)


def code_version() -> str:
    """Which mq_bridge ran: its source directory, and the commit when it is this repo's."""
    import mq_bridge

    source = Path(mq_bridge.__file__).resolve().parents[1]
    if source == ROOT / "src":
        done = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return f"{done.stdout.strip()} ({source})"
    return str(source)


def report(figures: Figures) -> None:
    """Print the figures, and append them to $FAULTS_REPORT (JSON lines) when it is set."""
    print("\n" + figures.line())
    target = os.environ.get("FAULTS_REPORT")
    if target:
        with open(target, "a") as out:
            out.write(json.dumps(asdict(figures)) + "\n")


class Side(Protocol):
    """What a case needs of a broker or the twain log (see tests/faults/sides.py)."""

    name: str
    down_seconds: float

    def input(self) -> dict[str, Any]: ...
    def output(self) -> dict[str, Any]: ...
    def publisher(self) -> dict[str, Any]: ...
    def sink(self) -> dict[str, Any]: ...
    def start(self) -> None: ...
    def prepare(self, role: str) -> None: ...
    def restart(self, down_seconds: float) -> float: ...
    def lost_by_broker(self, role: str, missing: dict[int, Sent]) -> set[int]: ...
    def log_tail(self) -> str: ...


@dataclass
class Plan:
    """The timeline of a case (seconds) and the producer's rate (messages a second)."""

    #: None: the broker side's own (`Side.down_seconds`, 3 s but for RabbitMQ)
    down_seconds: float | None = None
    before_seconds: float = 2.0
    after_seconds: float = 3.0
    rate: float = 250.0
    kill_route: bool = False
    #: the broker is down when the route starts and comes up `down_seconds` later
    late_start: bool = False
    drain_timeout: float = 30.0
    #: drained when no new number reached the sink for this long
    stall_seconds: float = 6.0
    route_options: dict[str, Any] = field(default_factory=dict)
    handler: str | None = HANDLER


@dataclass
class Outcome:
    figures: Figures
    diagnosis: str  # the route logs' and the broker log's tails, the clients' errors

    def message(self) -> str:
        return f"{self.figures.line()}\n{self.diagnosis}"


def run_case(
    scenario: str, broker: Side, role: str, twain: Side, work: Path, plan: Plan
) -> Outcome:
    """Run one case: the broker as the route's `role` (input/output), twain the other side."""
    source, target = (broker, twain) if role == "input" else (twain, broker)
    down_seconds = broker.down_seconds if plan.down_seconds is None else plan.down_seconds
    started = time.monotonic()
    routes: list[RouteProcess] = []
    producer = NumberedProducer(source.publisher(), plan.rate)
    sink = Sink(target.sink())
    t_down = t_up = started
    first_after = 0
    recovered_before_kill: bool | None = None
    try:
        twain.start()
        if not plan.late_start:
            broker.start()
            broker.prepare(role)
        config = route_file(
            work / "faults.yaml", source.input(), target.output(), **plan.route_options
        )
        sink.start()
        routes.append(RouteProcess(config, work / "route-1.log", plan.handler))
        producer.start()
        if plan.late_start:
            t_down = time.monotonic()
            time.sleep(down_seconds)
            broker.start()
            t_up = time.monotonic()
        else:
            _wait_for_flow(sink, routes[0])
            time.sleep(plan.before_seconds)
            t_down, first_after = time.monotonic(), producer.next_number
            t_up = broker.restart(down_seconds)
        if plan.kill_route:  # once the route recovered by itself (a kill must not hide that)
            recovered_before_kill = _wait_for_recovery(sink, first_after, t_up)
            routes[-1].kill()
            routes.append(RouteProcess(config, work / "route-2.log", plan.handler))
        _wait_for_after(producer, t_up, plan.after_seconds)
        producer.stop()
        drain(producer, sink, plan.drain_timeout, plan.stall_seconds)
    finally:
        producer.stop()
        for route in routes:
            route.alive()  # notes an exit nobody asked for, before the stop below
        final = [route.stop() for route in routes][-1] if routes else None
        sink.stop()
    figures = measure(
        scenario, producer, sink, t_up, first_after, partial(broker.lost_by_broker, role)
    )
    down_at = getattr(getattr(broker, "server", None), "down_at", None)  # its port closed
    figures.outage_seconds = round(t_up - (down_at or t_down), 2)
    figures.route_killed = plan.kill_route
    figures.recovered_before_kill = recovered_before_kill
    figures.route_exits = [r.ended_by_itself for r in routes if r.ended_by_itself is not None]
    figures.final_status = final
    figures.seconds = round(time.monotonic() - started, 1)
    report(figures)
    diagnosis = "\n".join(
        [*(route.tail() for route in routes), f"--- {broker.name} log", broker.log_tail(),
         f"producer errors: {figures.producer_errors} (reopened {producer.reopened})",
         f"sink errors: {figures.sink_errors} (reopened {sink.reopened})"]
    )  # fmt: skip
    return Outcome(figures, diagnosis)


def _wait_for_flow(sink: Sink, route: RouteProcess, timeout: float = 60.0) -> None:
    """Until the first messages went all the way through (the route connected and reads)."""
    deadline = time.monotonic() + timeout
    while len(sink.first_seen) < 20:
        if not route.alive():
            raise AssertionError(f"the route ended before any message went through\n{route.tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no message went through in {timeout:.0f}s\n{route.tail()}")
        time.sleep(0.05)


def _wait_for_recovery(sink: Sink, first_after: int, t_up: float, timeout: float = 15.0) -> bool:
    """Until a message sent since the outage began reached the sink after t_up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(n >= first_after and at >= t_up for n, at in sink.arrivals().items()):
            return True
        time.sleep(0.05)
    return False


def _wait_for_after(producer: NumberedProducer, t_up: float, seconds: float) -> None:
    """`seconds` past t_up, and at least 50 messages acknowledged since (bounded)."""
    deadline = t_up + seconds + 30
    while time.monotonic() < t_up + seconds or producer.acked_since(t_up) < 50:
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
