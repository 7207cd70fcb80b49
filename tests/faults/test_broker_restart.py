"""A broker restarted under a running ``mq-bridge run`` route: nothing acknowledged is lost.

Issue 22, item 8. Each case runs the route as users run it (a real ``mq-bridge run CONFIG
--handler tests.faults.handlers:pass_through`` process, no retry middleware), with the broker
on one side and the embedded twain log on the other, so messages keep flowing while the broker
is down. A producer sends uniquely numbered messages before, during and after the outage
(retrying each until its send returns: only then is it "acknowledged at the source"); the
broker is stopped, kept down ~3 s and started again; the sink is drained and every
acknowledged number must have reached it (duplicates are allowed: at least once).

- 12 cases: RabbitMQ, Mosquitto, NATS JetStream, Redis streams, PostgreSQL (sqlx) and the
  Kafka-protocol server (Tansu), each once as the route's input and once as its output.
  In one case per broker the route process is also killed (-9) right after it delivered
  again (it must recover by itself first: a new process must not hide a stuck one) and a
  new ``mq-bridge run`` resumes.
- 2 cases: RabbitMQ and Mosquitto as the output of a route without ``--handler`` (no
  handler stage: endpoint errors reach the runtime unwrapped, another path).
- 1 case: the output broker is down when the route starts and comes up 3 s later; the route
  waits for it (``startup_timeout_ms`` larger than the outage).

Redis, Mosquitto, NATS and Tansu run as private instances with persistence on (the shared
ones forget data on a restart, or are used by everyone): see tests/faults/servers.py.
Tansu loses the last produce it answered before it exits, whatever the client: the Kafka
cases count what it lost apart (``broker_lost``; the reason and the rule in
tests/faults/sides.py, KafkaSide). Figures per case (acknowledged, received, lost,
duplicates, seconds to recover) are printed, put in the assertion message, and appended to
``$FAULTS_REPORT`` (JSON lines) when set::

    FAULTS_REPORT=faults.jsonl pytest -m faults tests/faults/test_broker_restart.py -s
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.harness import Outcome, Plan, run_case
from tests.faults.sides import (
    KafkaSide,
    MosquittoSide,
    NatsSide,
    PostgresSide,
    RabbitSide,
    RedisSide,
    Side,
    TwainSide,
)

pytestmark = [pytest.mark.faults, pytest.mark.slow]

SIDES: dict[str, Callable[[pytest.FixtureRequest, Path], Side]] = {
    "rabbitmq": lambda request, _: RabbitSide(request.getfixturevalue("amqp_url")),
    "postgres": lambda request, _: PostgresSide(request.getfixturevalue("postgres_url")),
    "mosquitto": lambda _, directory: MosquittoSide(directory),
    "nats": lambda _, directory: NatsSide(directory),
    "redis": lambda _, directory: RedisSide(directory),
    "kafka": lambda _, directory: KafkaSide(directory),
}
MARKS = {
    "rabbitmq": pytest.mark.amqp,
    "postgres": pytest.mark.postgres,
    "mosquitto": pytest.mark.mqtt,
    "nats": pytest.mark.nats,
    "redis": pytest.mark.redis,
    "kafka": pytest.mark.kafka,
}
#: (broker, role) of the case per broker that also kills the route process.
KILLED = {
    ("rabbitmq", "output"),
    ("mosquitto", "output"),
    ("nats", "input"),
    ("redis", "output"),
    ("postgres", "input"),
    ("kafka", "output"),
}


def case(broker: str, role: str) -> object:
    kill = (broker, role) in KILLED
    name = f"{broker}-{role}" + ("-kill" if kill else "")
    return pytest.param(broker, role, kill, marks=MARKS[broker], id=name)


def check(outcome: Outcome) -> None:
    """Nothing acknowledged lost; no route ended by itself; a killed route had recovered
    from the restart by itself first (the new process must not hide a stuck one)."""
    figures = outcome.figures
    assert figures.lost == 0, outcome.message()
    assert not figures.route_exits, f"a route ended by itself: {outcome.message()}"
    assert figures.recovered_before_kill is not False, (
        f"the route did not deliver again within 15 s of the restart: {outcome.message()}"
    )


@pytest.fixture
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    """The broker of the case (`request.param`), its queues/tables deleted afterwards and
    every shared server left running."""
    made = SIDES[request.param](request, tmp_path / request.param)
    try:
        yield made
    finally:
        made.cleanup()


@pytest.mark.parametrize(
    ("side", "role", "kill"),
    [case(broker, role) for broker in SIDES for role in ("input", "output")],
    indirect=["side"],
)
def test_a_broker_restart_under_a_running_route_loses_nothing(
    side: Side, role: str, kill: bool, tmp_path: Path
) -> None:
    scenario = f"{side.name}-{role}" + ("-kill" if kill else "")
    outcome = run_case(
        scenario, side, role, TwainSide(tmp_path / "twain"), tmp_path, Plan(kill_route=kill)
    )
    check(outcome)


@pytest.mark.parametrize(
    "side",
    [pytest.param(broker, marks=MARKS[broker], id=f"{broker}-output-no-handler")
     for broker in ("rabbitmq", "mosquitto")],
    indirect=True,
)  # fmt: skip
def test_a_route_without_a_handler_holds_its_output_across_a_restart(
    side: Side, tmp_path: Path
) -> None:
    """The same restart of the output broker, ``mq-bridge run`` without ``--handler`` (the
    route forwards unchanged): there is no handler stage, so an endpoint error reaches the
    runtime as it is (a handler stage turns every failure into a `SendError`). Before issue
    22's fix this is the path that closed the output to reconnect and then dropped every
    message on the closed output (``ClosedError``, not retriable)."""
    scenario = f"{side.name}-output-no-handler"
    plan = Plan(handler=None)
    outcome = run_case(scenario, side, "output", TwainSide(tmp_path / "twain"), tmp_path, plan)
    check(outcome)


@pytest.mark.redis
@pytest.mark.parametrize(
    "side", [pytest.param("redis", id="redis-output-down-at-start")], indirect=True
)
def test_a_route_waits_for_an_output_broker_that_is_down_at_start(
    side: Side, tmp_path: Path
) -> None:
    """Redis is not running when ``mq-bridge run`` starts; it comes up 3 s later. With a
    ``startup_timeout_ms`` longer than that the route waits, then delivers everything."""
    plan = Plan(late_start=True, route_options={"startup_timeout_ms": 15_000})
    outcome = run_case(
        "redis-output-down-at-start", side, "output", TwainSide(tmp_path / "twain"), tmp_path, plan
    )
    check(outcome)
