"""`ConnectionRegistry`: shared, reference-counted connections, with real threads."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from mq_bridge.endpoints.kit.connections import (
    ConnectionRegistry,
    Lease,
    connection_key,
    default_registry,
)
from mq_bridge.endpoints.kit.tls import TlsOptions
from mq_bridge.errors import ClosedError

pytestmark = pytest.mark.timeout(30)
WAIT = 10.0  # the bound on every wait for another thread: generous, never reached


class Connection:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False


class Broker:
    """Opens numbered connections and records what was opened and closed."""

    def __init__(self) -> None:
        self.opened: list[Connection] = []
        self.closed: list[Connection] = []
        self._lock = threading.Lock()

    def open(self) -> Connection:
        with self._lock:
            connection = Connection(len(self.opened))
            self.opened.append(connection)
            return connection

    def close(self, connection: Connection) -> None:
        connection.closed = True
        with self._lock:
            self.closed.append(connection)


@pytest.fixture
def registry() -> ConnectionRegistry:
    return ConnectionRegistry()


@pytest.fixture
def broker() -> Broker:
    return Broker()


# --- keys -------------------------------------------------------------------------------


def test_connection_key_is_hashable_and_ignores_dict_order() -> None:
    first = connection_key("amqp", url="amqp://h", tls={"required": True, "ca_file": "ca"})
    second = connection_key("amqp", tls={"ca_file": "ca", "required": True}, url="amqp://h")
    assert first == second and hash(first) == hash(second)
    assert first != connection_key("mqtt", url="amqp://h", tls={"required": True, "ca_file": "ca"})
    assert first != connection_key("amqp", url="amqp://other", tls={"required": True})


def test_connection_key_freezes_nested_values_models_and_dataclasses() -> None:
    @dataclasses.dataclass
    class Credentials:
        user: str
        roles: list[str]

    tls = TlsOptions.model_validate({"required": True, "ca_file": "ca.pem"})
    key = connection_key(
        "kafka",
        servers=["a:9092", "b:9092"],
        tags={"x", "y"},
        tls=tls,
        auth=Credentials("me", ["r"]),
    )
    hash(key)
    same_tls = TlsOptions.model_validate({"ca_file": "ca.pem", "required": True})
    assert key == connection_key(
        "kafka",
        servers=("a:9092", "b:9092"),
        tags={"y", "x"},
        tls=same_tls,
        auth=Credentials("me", ["r"]),
    )
    assert key != connection_key("kafka", servers=["b:9092", "a:9092"], tls=tls)


def test_connection_key_refuses_unhashable_values() -> None:
    with pytest.raises(TypeError):
        connection_key("x", value=bytearray(b"no"))


# --- sharing ----------------------------------------------------------------------------


def test_shared_leases_share_one_connection_closed_by_the_last_release(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    first = registry.acquire(("k", 1), broker.open, broker.close)
    second = registry.acquire(("k", 1), broker.open, broker.close)
    assert first.connection is second.connection
    assert len(broker.opened) == 1 and len(registry) == 1
    first.release()
    assert broker.closed == [] and not second.connection.closed
    second.release()
    assert broker.closed == broker.opened and len(registry) == 0


def test_different_keys_get_different_connections(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    with (
        registry.acquire("a", broker.open, broker.close) as a,
        registry.acquire("b", broker.open, broker.close) as b,
    ):
        assert a.connection is not b.connection
    assert len(broker.closed) == 2


def test_after_the_last_release_the_next_acquire_opens_again(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    registry.acquire("k", broker.open, broker.close).release()
    with registry.acquire("k", broker.open, broker.close) as lease:
        assert lease.connection is broker.opened[1]


def test_unshared_leases_get_private_connections(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    shared = registry.acquire("k", broker.open, broker.close)
    private = registry.acquire("k", broker.open, broker.close, shared=False)
    other = registry.acquire("k", broker.open, broker.close, shared=False)
    assert len({id(shared.connection), id(private.connection), id(other.connection)}) == 3
    assert len(registry) == 1  # only the shared one is registered
    private.release()
    assert broker.closed == [broker.opened[1]]
    other.release()
    shared.release()
    assert len(broker.closed) == 3


def test_release_is_idempotent_and_a_released_lease_is_closed(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    keep = registry.acquire("k", broker.open, broker.close)
    lease = registry.acquire("k", broker.open, broker.close)
    lease.release()
    lease.release()  # must not count twice: `keep` still holds the connection
    assert lease.released and broker.closed == []
    with pytest.raises(ClosedError):
        lease.connection  # noqa: B018
    keep.release()
    assert len(broker.closed) == 1


def test_a_lease_is_a_context_manager(registry: ConnectionRegistry, broker: Broker) -> None:
    with registry.acquire("k", broker.open, broker.close) as lease:
        assert isinstance(lease, Lease)
        assert lease.connection is broker.opened[0]
    assert lease.released and broker.closed == broker.opened


def test_a_failed_open_leaves_nothing_registered(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    def refuse() -> Connection:
        raise ConnectionRefusedError("no broker")

    with pytest.raises(ConnectionRefusedError):
        registry.acquire("k", refuse, broker.close)
    assert len(registry) == 0
    with registry.acquire("k", broker.open, broker.close) as lease:
        assert lease.connection is broker.opened[0]


def test_close_errors_are_logged_not_raised(
    registry: ConnectionRegistry, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(connection: Connection) -> None:
        raise OSError("broken pipe")

    lease = registry.acquire(connection_key("nats", password="hunter2"), broker.open, fail)
    private = registry.acquire("p", broker.open, fail, shared=False)
    with caplog.at_level(logging.WARNING, logger="mq_bridge.endpoints"):
        lease.release()
        private.release()
    failures = [record for record in caplog.records if "closing a" in record.getMessage()]
    assert len(failures) == 2
    assert "nats" in failures[0].getMessage()
    assert "hunter2" not in caplog.text  # keys hold credentials: never logged
    assert len(registry) == 0


def test_the_default_registry_is_one_per_process() -> None:
    assert default_registry() is default_registry()
    assert isinstance(default_registry(), ConnectionRegistry)


# --- threads ----------------------------------------------------------------------------


def test_threads_acquiring_one_key_at_once_open_it_once(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    threads = 8
    start = threading.Barrier(threads + 1, timeout=WAIT)
    may_open = threading.Event()

    def slow_open() -> Connection:
        assert may_open.wait(WAIT)
        return broker.open()

    def acquire() -> Lease[Connection]:
        start.wait()
        return registry.acquire("k", slow_open, broker.close)

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(acquire) for _ in range(threads)]
        start.wait()
        may_open.set()
        leases = [future.result(WAIT) for future in futures]
    assert len(broker.opened) == 1
    assert all(lease.connection is broker.opened[0] for lease in leases)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(Lease.release, leases))
    assert broker.closed == broker.opened and len(registry) == 0


def test_a_slow_open_does_not_block_other_keys(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    opening_a, may_open_a = threading.Event(), threading.Event()

    def slow_open() -> Connection:
        opening_a.set()
        assert may_open_a.wait(WAIT)
        return broker.open()

    waiting_for_a = _in_thread(lambda: registry.acquire("a", slow_open, broker.close))
    assert opening_a.wait(WAIT)
    b = _in_thread(lambda: registry.acquire("b", broker.open, broker.close))
    assert b.done.wait(WAIT), "acquiring key b waited for key a's open"
    assert not waiting_for_a.done.is_set()
    may_open_a.set()
    assert waiting_for_a.done.wait(WAIT)
    assert waiting_for_a.result.connection is not b.result.connection


def test_waiters_share_the_openers_result_or_error(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    opening, may_fail = threading.Event(), threading.Event()

    def failing_open() -> Connection:
        opening.set()
        assert may_fail.wait(WAIT)
        raise ConnectionRefusedError("no broker")

    opener = _in_thread(lambda: registry.acquire("k", failing_open, broker.close))
    assert opening.wait(WAIT)
    # This one finds the entry being opened and waits for it (its own open is not used).
    waiter = _in_thread(lambda: registry.acquire("k", broker.open, broker.close))
    may_fail.set()
    assert opener.done.wait(WAIT) and waiter.done.wait(WAIT)
    assert isinstance(opener.error, ConnectionRefusedError)
    # The waiter either shared the failed open, or came after it and opened afresh.
    if waiter.error is not None:
        assert isinstance(waiter.error, ConnectionRefusedError)
        assert len(registry) == 0
    else:
        waiter.result.release()
    assert len(registry) == 0


class _Outcome:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Lease[Connection]
        self.error: BaseException | None = None


def _in_thread(acquire: Callable[[], Lease[Connection]]) -> _Outcome:
    outcome = _Outcome()

    def run() -> None:
        try:
            outcome.result = acquire()
        except BaseException as error:
            outcome.error = error
        finally:
            outcome.done.set()

    threading.Thread(target=run, daemon=True).start()
    return outcome


def test_close_at_exit_closes_what_was_never_released_once(
    registry: ConnectionRegistry, broker: Broker
) -> None:
    """A script that forgot ``close()``: the exit closes its connection (shared or private),
    once; what was released is not closed again, and what opts out is left alone."""
    from mq_bridge.endpoints.kit import event_loop

    shared = registry.acquire("a", broker.open, broker.close, close_at_exit=True)  # #0
    registry.acquire("a", broker.open, broker.close, close_at_exit=True)  # a second user
    private = registry.acquire("p", broker.open, broker.close, False, close_at_exit=True)  # #1
    registry.acquire("b", broker.open, broker.close, close_at_exit=True).release()  # #2
    registry.acquire("c", broker.open, broker.close)  # #3: not to be closed at exit
    try:
        assert [c.number for c in broker.closed] == [2]
        registry.close_left_open()
        assert sorted(c.number for c in broker.closed) == [0, 1, 2]
        assert len(registry) == 1  # "c" only
        shared.release()  # a release after the exit closed it closes nothing again
        private.release()
        registry.close_left_open()
        assert sorted(c.number for c in broker.closed) == [0, 1, 2]
        assert event_loop._exit_hooks.count(registry.close_left_open) == 1  # given once
    finally:
        event_loop._exit_hooks.remove(registry.close_left_open)
