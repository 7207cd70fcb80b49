"""`Route`: input -> handler -> output, on a thread of its own.

    route = Route.from_config(config, "orders").with_handler(handle)
    route.start()        # builds and connects the endpoints here: errors raise here
    ...
    route.stop(); route.join()

Lifecycle: new -> running (start) -> stopped (once `stop()` was asked and the batch in
hand is finished, or the route failed) -> running again (start). `start` on a running
route raises `RuntimeError`; a stopped route starts afresh: new endpoints and connections,
from where its input's commits left off. `join` re-raises an error that ended the route.
"""

from __future__ import annotations

import atexit
import enum
import inspect
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from mq_bridge.config.loader import Source, load_route
from mq_bridge.config.redaction import redact
from mq_bridge.endpoints.base import InputEndpoint, OutputEndpoint
from mq_bridge.runtime.connect import connect_all
from mq_bridge.runtime.constructors import FromConfig
from mq_bridge.runtime.delivery import Deliverer
from mq_bridge.runtime.factory import build_input, build_output, new_context
from mq_bridge.runtime.failures import FailurePolicy
from mq_bridge.runtime.gc_policy import GcPolicy
from mq_bridge.runtime.handler import Handler, HandlerStage, KindDispatcher
from mq_bridge.runtime.knobs import RuntimeKnobs, read_knobs
from mq_bridge.runtime.route_runner import RouteRunner, RunnerSettings, route_backoff

if TYPE_CHECKING:
    from mq_bridge.config.route_options import RouteOptions

__all__ = ["Route"]


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class Route(FromConfig):
    """A route from its input to its output through an optional Python handler."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        """Prefer the `from_file` / `from_str` / `from_config` constructors."""
        self._config = dict(config)
        self._raw_handler: Handler | None = None
        self._kind_handlers: dict[str, Callable[[Any], Any]] = {}
        self._state = _State.NEW
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._runner: RouteRunner | None = None
        self._endpoints: tuple[InputEndpoint, OutputEndpoint] | None = None

    @classmethod
    def _load(cls, source: Source, name: str | None) -> Route:
        return cls(load_route(source, name))

    @property
    def name(self) -> str:
        return str(self._config.get("name", "route"))

    def with_handler(self, handler: Handler) -> Route:
        """Call `handler(message)` for each message. It replaces every handler set before,
        kind handlers too; kind handlers added after it take their kinds and leave it the
        rest (both peers' rules). A running route's handlers cannot change (`RuntimeError`).
        """
        if not callable(handler):
            raise TypeError(f"handler must be callable, not {type(handler).__name__}")
        self._refuse_while_running()
        self._raw_handler = handler
        self._kind_handlers = {}
        return self

    def add_handler(self, kind: str, handler: Callable[[Any], Any]) -> Route:
        """Call `handler(json_value)` for messages whose metadata ``kind`` is `kind` (the
        last one added for a kind wins; a `with_handler` handler gets the other kinds)."""
        if not callable(handler):
            raise TypeError(f"handler must be callable, not {type(handler).__name__}")
        self._refuse_while_running()
        self._kind_handlers[kind] = handler
        return self

    def _refuse_while_running(self) -> None:
        """Both peers refuse: the running route would go on with the handlers it started with."""
        if self._state is _State.RUNNING and not self._stopping.is_set():
            raise RuntimeError("Route handlers cannot be modified while the route is running")

    def start(self) -> None:
        """Build and connect the endpoints (errors raise here), then run on a thread."""
        with self._lock:
            if self._state is _State.RUNNING and not self._stopping.is_set():
                raise RuntimeError(f"route {self.name!r} is already running")
            if self._thread is not None:
                self._thread.join()  # stopped or stopping: let it finish closing first
            self._state = _State.RUNNING
            self._stopping = threading.Event()
            self._thread = self._runner = self._endpoints = None
        try:
            runner = self._build_runner()
        except BaseException:
            self._state = _State.STOPPED
            raise
        self._runner = runner
        self._thread = threading.Thread(target=self._run_and_close, name=f"route-{self.name}")
        self._thread.daemon = True
        self._thread.start()
        _close_at_exit(self)

    def run(self) -> None:
        """Start and block until `stop()` (from another thread) or Ctrl-C."""
        self.start()
        self.join()

    def stop(self) -> None:
        """Ask the route to stop after the batch in hand; returns at once (see `join`)."""
        self._stopping.set()
        if self._endpoints is not None:
            self._endpoints[0].interrupt()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the route to stop; re-raise the error that ended it, if any."""
        thread = self._thread
        if thread is None:
            return
        try:
            while thread.is_alive():
                thread.join(0.2 if timeout is None else timeout)
                if timeout is not None:
                    break
        except KeyboardInterrupt:
            self.stop()
            thread.join()
            raise
        if not thread.is_alive() and self._runner is not None and self._runner.error is not None:
            error, self._runner.error = self._runner.error, None
            raise error

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def status(self) -> dict[str, Any]:
        """A snapshot: ``healthy`` (False while the input cannot read or the output cannot
        deliver, e.g. a broker is away or a message keeps failing), ``error`` (why, or
        None), ``running``, and each endpoint's own `status()` under ``input``/``output``."""
        from mq_bridge.observability.counters import route_counters

        counters = route_counters(self.name)
        running = self.running
        snapshot: dict[str, Any] = {
            "name": self.name,
            "running": running,
            "healthy": running and counters.healthy,
            "error": counters.health_reason if running else "not running",
        }
        if self._endpoints is not None and running:
            source, output = self._endpoints
            sides: dict[str, InputEndpoint | OutputEndpoint] = {"input": source, "output": output}
            for side, endpoint in sides.items():
                try:
                    snapshot[side] = endpoint.status().as_dict()
                except Exception as error:  # a status must never raise for a live route
                    snapshot[side] = {"healthy": False, "error": repr(error)}
        return snapshot

    def __enter__(self) -> Route:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
        self.join()

    def __repr__(self) -> str:
        return (
            f"Route(name={self.name!r}, state={self._state.value}, config={redact(self._config)!r})"
        )

    def _handler(self) -> tuple[Handler | None, bool]:
        if self._kind_handlers:
            dispatcher = KindDispatcher(dict(self._kind_handlers), self._raw_handler)
            return dispatcher, dispatcher.has_coroutines
        handler = self._raw_handler
        return handler, handler is not None and _may_await(handler)

    def _build_runner(self) -> RouteRunner:
        config = self._config
        options = route_options(config)
        knobs = read_knobs()
        context = new_context(self.name, options.allow_fault_injection, self._stopping)
        handler, may_await = self._handler()
        around = None if handler is None else (lambda ep: HandlerStage(ep, handler, may_await))
        source = build_input(config["input"], context)
        output = build_output(config.get("output") or {"null": None}, context, around)
        connect_all([source, output], options.startup_timeout_ms / 1000, self.name, self._stopping)
        self._endpoints = (source, output)
        reconnect = options.reconnect_interval_ms / 1000
        settings = _settings(options, knobs, self.name, reconnect)
        policy = FailurePolicy(source.redelivers, options.on_error, self._stopping)
        deliverer = Deliverer(
            output,
            self._stopping,
            self.name,
            route_backoff(reconnect),
            policy,
            replies=context.replies,
        )
        gc_policy = GcPolicy(knobs.gc_mode, knobs.gc_threshold)
        return RouteRunner(source, deliverer, settings, self._stopping, gc_policy)

    def _run_and_close(self) -> None:
        assert self._runner is not None and self._endpoints is not None
        try:
            self._runner.run()
        finally:
            self._close_endpoints()
            self._state = _State.STOPPED

    def _close_endpoints(self) -> None:
        assert self._endpoints is not None
        source, output = self._endpoints
        for close in (output.flush, output.close, source.close):
            try:
                close()
            except Exception as error:
                if self._runner is not None and self._runner.error is None:
                    self._runner.error = error


def _may_await(handler: Callable[..., Any]) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def route_options(config: Mapping[str, Any]) -> RouteOptions:
    """The route settings of `config` (its input and output aside), defaults filled in."""
    from mq_bridge.config.declarations import parse_options
    from mq_bridge.config.route_options import RouteOptions

    settings = {key: config[key] for key in RouteOptions.model_fields if key in config}
    return parse_options(RouteOptions, settings, "route")


def _settings(
    options: RouteOptions, knobs: RuntimeKnobs, name: str, reconnect: float
) -> RunnerSettings:
    return RunnerSettings(
        name=name,
        batch_size=options.batch_size,
        pipelined=options.concurrency > 1 or knobs.executor == "worker",
        concurrency=options.concurrency,
        max_in_flight=options.commit_concurrency_limit,
        max_handling=knobs.handler_concurrency,
        empty_batch_delay=options.empty_batch_delay_ms / 1000,
        reconnect_interval=reconnect,
    )


#: Routes whose thread may still run when the interpreter exits.
_live_routes: weakref.WeakSet[Route] = weakref.WeakSet()
_EXIT_GRACE_SECONDS = 10.0


def _close_at_exit(route: Route) -> None:
    if not _live_routes:
        atexit.unregister(_stop_live_routes)
        atexit.register(_stop_live_routes)
    _live_routes.add(route)


def _stop_live_routes() -> None:
    """At interpreter exit: stop every route still running and let it close its endpoints
    (commit what was acked, close broker clients) for up to ten seconds in all. A route
    thread is a daemon: without this, an exit freezes it mid-call, and a driver's own
    threads (librdkafka's) can then crash the process while it finalizes."""
    routes = [route for route in list(_live_routes) if route.running]
    for route in routes:
        route.stop()
    deadline = time.monotonic() + _EXIT_GRACE_SECONDS
    for route in routes:
        thread = route._thread
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
