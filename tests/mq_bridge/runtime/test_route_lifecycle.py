"""Route lifecycle: start/run/stop/join, errors from start(), options and knobs."""

from __future__ import annotations

import gc
import sys
import threading
import time
import types

import pytest

from mq_bridge import Message, Publisher, Route
from mq_bridge.config.declarations import Options, secret_field
from mq_bridge.endpoints.registry import ENDPOINT_MODULES
from mq_bridge.errors import ConfigError, EndpointError, EndpointUnavailableError
from tests.helpers import wait_until
from tests.mq_bridge.helpers import read, unique
from tests.mq_bridge.runtime.scripted import Script


def simple(**options: object) -> Route:
    return Route.from_config(
        {
            "input": {"memory": {"topic": unique("in")}},
            "output": {"memory": {"topic": unique("out")}},
            **options,
        }
    )


def test_a_running_route_refuses_a_second_start_and_a_stopped_one_starts_again():
    route = simple()
    route.start()
    with pytest.raises(RuntimeError, match="already running"):
        route.start()
    route.stop()
    route.join()
    route.start()  # as mq-bridge: a stopped route can be started again
    assert route.running
    route.stop()
    route.start()  # stop() then start() without join(): waits for the old run to close
    assert route.running
    route.stop()
    route.join()
    assert not route.running


def test_a_running_route_refuses_new_handlers_and_a_stopped_one_takes_them():
    """Both peers: the running route would go on with the handlers it started with."""
    route = simple().with_handler(lambda message: message)
    route.start()
    try:
        for change in (
            lambda: route.with_handler(lambda message: None),
            lambda: route.add_handler("order", lambda data: data),
        ):
            with pytest.raises(RuntimeError, match="cannot be modified while the route is running"):
                change()
    finally:
        route.stop()
        route.join()
    assert route.with_handler(lambda message: message).add_handler("k", dict) is route


def test_run_blocks_until_stop_is_called_from_another_thread():
    route = simple()
    stopped_at: list[float] = []

    def stop_later() -> None:
        time.sleep(0.1)
        stopped_at.append(time.monotonic())
        route.stop()

    threading.Thread(target=stop_later).start()
    route.run()
    assert stopped_at and time.monotonic() >= stopped_at[0]


def test_config_errors_raise_from_the_constructor_or_start_not_a_background_thread():
    with pytest.raises(ConfigError, match="capacity"):
        Route.from_config({"input": {"memory": {"topic": "t", "capacity": -1}}})
    with pytest.raises(ConfigError, match=r"input\.memory\.url: only memory://"):
        Route.from_config({"input": {"memory": {"url": "ipc://elsewhere"}}})
    route = Route.from_config({"input": {"twain": {"root": "/dev/null/x", "topic": "t"}}})
    with pytest.raises(EndpointError, match="cannot open the store"):
        route.start()
    assert not route.running


def test_an_endpoint_that_does_not_connect_in_time_fails_start(scripted):
    hang = threading.Event()
    scripted["slow"] = Script([], connect_hangs=hang)
    route = Route.from_config({"input": {"scripted": {"name": "slow"}}, "startup_timeout_ms": 50})
    try:
        with pytest.raises(EndpointUnavailableError, match="startup_timeout_ms=50"):
            route.start()
    finally:
        hang.set()


def test_a_bounded_input_ends_the_route_by_itself_after_acking_everything(scripted):
    script = Script([Message(f"m{i}".encode()) for i in range(10)])
    scripted["file-like"] = script
    route = Route.from_config({"input": {"scripted": {"name": "file-like"}}, "batch_size": 3})
    route.start()
    route.join()
    assert len(script.acked) == 10 and script.closes == 1


@pytest.mark.parametrize("executor", ["direct", "worker"])
def test_acks_follow_source_order_with_concurrent_handlers(scripted, monkeypatch, executor):
    monkeypatch.setenv("MQ_BRIDGE_PY_HANDLER_EXECUTOR", executor)
    monkeypatch.setenv("MQ_BRIDGE_PY_HANDLER_CONCURRENCY", "2")
    script = Script([Message(str(i).encode()) for i in range(40)])
    scripted["ordered"] = script

    def slow_on_odd_batches(message: Message) -> Message:
        if int(message.payload) % 4 < 2:
            time.sleep(0.002)
        return message

    route = Route.from_config(
        {
            "input": {"scripted": {"name": "ordered"}},
            "output": {"null": None},
            "batch_size": 2,
            "concurrency": 4,
            "commit_concurrency_limit": 3,
        }
    ).with_handler(slow_on_odd_batches)
    route.start()
    route.join()
    assert [int(m.payload) for m in script.acked] == list(range(40))


def test_the_context_manager_starts_and_stops():
    source, sink = unique("in"), unique("out")
    config = {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
    with Route.from_config(config) as route:
        assert route.running
        Publisher.from_config({"memory": {"topic": source}}).send(b"x")
        assert [m.payload for m in read(sink, 1, 5.0)] == [b"x"]
    assert not route.running


def test_deprecated_constructors_warn(tmp_path):
    path = tmp_path / "route.yaml"
    path.write_text("input:\n  memory:\n    topic: t\n")
    with pytest.warns(DeprecationWarning, match="from_file"):
        Route.from_yaml(str(path))
    with pytest.warns(DeprecationWarning, match="from_str"):
        Route.from_yaml_str(path.read_text())


def test_a_bad_knob_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("MQ_BRIDGE_PY_HANDLER_EXECUTOR", "threads")
    with pytest.raises(ConfigError, match="MQ_BRIDGE_PY_HANDLER_EXECUTOR"):
        simple().start()


@pytest.mark.parametrize("mode", ["off", "count"])
def test_gc_modes_disable_automatic_gc_while_routes_run_and_restore_it(monkeypatch, mode):
    monkeypatch.setenv("MQ_BRIDGE_PY_GC_MODE", mode)
    monkeypatch.setenv("MQ_BRIDGE_PY_GC_THRESHOLD", "5")
    assert gc.isenabled()
    source, sink = unique("in"), unique("out")
    config = {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
    with Route.from_config(config):
        assert wait_until(lambda: not gc.isenabled(), 5.0)
        Publisher.from_config({"memory": {"topic": source}}).send_batch([b"1"] * 12)
        assert len(read(sink, 12, 5.0)) == 12
    assert gc.isenabled()


def test_repr_names_the_route_and_hides_secrets(monkeypatch):
    # A password in a URL, and a secret option (declared by a registered endpoint).
    vault = types.ModuleType("fake_vault", "vault: a fake output endpoint with a secret.")

    class VaultOptions(Options):
        sesame: str | None = secret_field(None, description="The word that opens it.")

    vault.OPTIONS = VaultOptions  # type: ignore[attr-defined]
    vault.build_output = lambda options, context: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_vault", vault)
    monkeypatch.setitem(ENDPOINT_MODULES, "vault", "fake_vault")
    route = Route.from_config(
        {
            "routes": {
                "orders": {
                    "input": {"memory": {"url": "memory://alice:hunter2@orders.in"}},
                    "output": {"vault": {"sesame": "open-sesame-42"}},
                }
            }
        },
        "orders",
    )
    shown = repr(route)
    assert "orders" in shown and "new" in shown
    assert "hunter2" not in shown and "open-sesame-42" not in shown
    assert "'sesame': '***'" in shown
    # The URL is hidden whole where an endpoint declares `url` secret, else its password.
    assert "'url': '***'" in shown or "memory://alice:***@orders.in" in shown


@pytest.mark.parametrize("executor", ["direct", "worker"])
def test_a_failing_ack_ends_the_route_and_join_raises_it(scripted, monkeypatch, executor):
    monkeypatch.setenv("MQ_BRIDGE_PY_HANDLER_EXECUTOR", executor)
    script = Script([Message(b"a")] * 50, bounded=False, ack_errors=[OSError("ack lost")])
    scripted["ack-fails"] = script
    route = Route.from_config(
        {
            "input": {"scripted": {"name": "ack-fails"}},
            "batch_size": 1,
            "commit_concurrency_limit": 2,
        }
    )
    route.start()
    with pytest.raises(OSError, match="ack lost"):
        route.join()
    assert not route.running
