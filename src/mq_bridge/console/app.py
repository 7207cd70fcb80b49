"""The console's aiohttp application: routes, access rules, and the server around it.

    GET  /topics                          every topic: partitions, messages, bytes, retention
    GET  /topics/{topic}                  its partitions: offsets, bytes, segments, problems
    GET  /topics/{topic}/messages         a page of one partition's latest messages
    GET  /groups                          every consumer group: generation, members, lag
    GET  /groups/{topic}/{group}          members, assignment, commits, lag per partition
    POST /groups/{topic}/{group}/reset    review, then (confirm=yes) reset: actions only
    GET  /routes, /api/routes             this process's routes (attached to `run`)
    GET  /metrics                         Prometheus text format (routes and the store)

Access: only requests sent to one of the console's names (`access`: the Host header, and
for a post the Origin or Referer too, against DNS rebinding). Read-only unless
`ConsoleSettings.allow_actions`. A state-changing request must carry the page's CSRF
value (a random secret per server, so another site cannot post for the user) and, when a
token is set (required when bound beyond loopback), the token. A bad name in a path (not
a topic or group name twainmq allows) answers 400 with one line; an unexpected error 500
with one line, and one log line (the traceback at DEBUG).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from mq_bridge.console import pages
from mq_bridge.console.access import Handler, HostRule, access_middleware, refusal, shown
from mq_bridge.console.views import (
    SAMPLE_INTERVAL,
    RateSampler,
    StoreView,
    route_rows,
    sample_routes,
)
from mq_bridge.endpoints.kit.bad_requests import BadRequests
from twainmq import InvalidTopicNameError
from twainmq.admin import InvalidGroupNameError

__all__ = ["ConsoleServer", "ConsoleSettings", "is_loopback", "make_app"]

PAGE_SIZES = (10, 20, 50, 100)
_LOG = logging.getLogger("mq_bridge.console")


@dataclass
class ConsoleSettings:
    """What a console serves and what it allows."""

    store_root: Path | None = None
    #: True inside ``mq-bridge run``: the routes page shows this process's routes.
    attached: bool = False
    allow_actions: bool = False
    token: str | None = None
    host: str = "127.0.0.1"
    #: more names (``NAME`` or ``NAME:PORT``) the console answers to (`access`)
    allowed_hosts: tuple[str, ...] = ()
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def host_rule(self) -> HostRule:
        """The Host (and Origin) values this console answers to."""
        return HostRule.of(self.host, self.allowed_hosts)

    def check(self) -> None:
        """Refuse settings that would open state changes to the network without a token,
        and allowed hosts that are not host names."""
        from mq_bridge.errors import ConfigError

        try:
            self.host_rule()
        except ValueError as error:
            raise ConfigError(
                f"an allowed host of the console is {error}", path="console"
            ) from None
        if self.allow_actions and not is_loopback(self.host) and not self.token:
            raise ConfigError(
                f"the console allows actions and listens on {self.host}, beyond loopback: "
                "give a token (--token or MQ_BRIDGE_CONSOLE_TOKEN)",
                path="console",
            )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_SETTINGS = web.AppKey("settings", ConsoleSettings)
_VIEW = web.AppKey("view", object)
_RATES = web.AppKey("rates", RateSampler)
_METRICS = web.AppKey("metrics", object)
_SAMPLING = web.AppKey("sampling", object)


def make_app(settings: ConsoleSettings) -> web.Application:
    """The console application for `settings` (already checked)."""
    app = web.Application(middlewares=[access_middleware(settings.host_rule()), _plain_errors])
    app[_SETTINGS] = settings
    app[_VIEW] = None
    if settings.store_root is not None:
        from mq_bridge.observability.store_stats import open_read_only

        app[_VIEW] = StoreView(open_read_only(settings.store_root))
    app[_RATES] = RateSampler()
    app[_METRICS] = _registry(settings)
    if settings.attached:
        app.on_startup.append(_start_sampling)
        app.on_cleanup.append(_stop_sampling)
    app.router.add_get("/", _index)
    app.router.add_get("/topics", _topics)
    app.router.add_get("/topics/{topic}", _topic)
    app.router.add_get("/topics/{topic}/messages", _messages)
    app.router.add_get("/groups", _groups)
    app.router.add_get("/groups/{topic}/{group}", _group)
    app.router.add_post("/groups/{topic}/{group}/reset", _reset)
    app.router.add_get("/routes", _routes)
    app.router.add_get("/api/routes", _api_routes)
    app.router.add_get("/metrics", _metrics)
    return app


async def _start_sampling(app: web.Application) -> None:
    """Look at the routes' counters every `SAMPLE_INTERVAL`, so a rate always has a base
    (`RateSampler`): the first read of a page shows the rate, not 0."""
    app[_SAMPLING] = asyncio.get_running_loop().create_task(_sample_forever(app[_RATES]))


async def _sample_forever(sampler: RateSampler) -> None:
    while True:
        sample_routes(sampler)
        await asyncio.sleep(SAMPLE_INTERVAL)


async def _stop_sampling(app: web.Application) -> None:
    task = app[_SAMPLING]
    assert isinstance(task, asyncio.Task)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@web.middleware
async def _plain_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A bad name answers 400, an unexpected error 500: one line each, no traceback."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except (InvalidTopicNameError, InvalidGroupNameError) as error:
        kind = "topic" if isinstance(error, InvalidTopicNameError) else "group"
        name = request.match_info.get(kind, "")
        return refusal(
            400,
            f"not a valid {kind} name: {shown(name)} (1-200 characters from "
            "A-Z a-z 0-9 . _ -, not starting with .)",
        )
    except Exception as error:
        _LOG.warning(
            "console: %s %s failed: %s: %s",
            request.method,
            shown(request.path),
            type(error).__name__,
            error,
        )
        _LOG.debug("console: the failed request's traceback", exc_info=True)
        return refusal(500, f"internal error ({type(error).__name__}); the log has more")


def _where(request: web.Request) -> str:
    settings = request.app[_SETTINGS]
    store = str(settings.store_root) if settings.store_root else "no store"
    mode = "actions enabled" if settings.allow_actions else "read-only"
    return f"{store} · {mode}"


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, content_type="text/html", status=status)


def _view(request: web.Request) -> StoreView:
    view = request.app[_VIEW]
    if not isinstance(view, StoreView):
        raise web.HTTPNotFound(
            text=pages.error_page("No store", "started without --root", _where(request)),
            content_type="text/html",
        )
    return view


async def _in_thread(function: Any, *args: Any) -> Any:
    """Store reads touch files: keep them off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, function, *args)


async def _index(request: web.Request) -> web.Response:
    target = "/topics" if request.app[_VIEW] is not None else "/routes"
    raise web.HTTPFound(target)


async def _topics(request: web.Request) -> web.Response:
    rows = await _in_thread(_view(request).topics)
    return _html(pages.topics_page(rows, _where(request), request.app[_SETTINGS].store_root))


async def _topic(request: web.Request) -> web.Response:
    view = _view(request)
    try:
        row = await _in_thread(view.topic, request.match_info["topic"])
    except KeyError:
        return _not_found(request, f"no topic {request.match_info['topic']!r}")
    groups = await _in_thread(view.topic_groups, row) if row.description is not None else []
    return _html(pages.topic_page(row, _where(request), groups))


async def _messages(request: web.Request) -> web.Response:
    view = _view(request)
    topic = request.match_info["topic"]
    try:
        partition = int(request.query.get("partition", "0"))
        page = max(0, int(request.query.get("page", "0")))
        size = int(request.query.get("size", "20"))
    except ValueError:
        return _bad_request(request, "partition, page and size must be integers")
    size = size if size in PAGE_SIZES else 20
    try:
        rows = await _in_thread(view.messages, topic, partition, page, size)
    except KeyError:
        return _not_found(request, f"no partition {partition} of topic {topic!r}")
    return _html(pages.messages_page(topic, partition, page, size, rows, _where(request)))


async def _groups(request: web.Request) -> web.Response:
    rows = await _in_thread(_view(request).groups)
    return _html(pages.groups_page(rows, _where(request)))


async def _group(request: web.Request, flash: str = "") -> web.Response:
    view = _view(request)
    topic, group = request.match_info["topic"], request.match_info["group"]
    try:
        row = await _in_thread(view.group, topic, group)
    except KeyError:
        return _not_found(request, f"no group {group!r} on topic {topic!r}")
    settings = request.app[_SETTINGS]
    actions = ""
    if settings.allow_actions:
        actions = pages.reset_form(topic, group, settings.csrf, settings.token is not None)
    return _html(pages.group_page(row, _where(request), actions, flash or _flash(request)))


def _flash(request: web.Request) -> str:
    return "offsets reset" if request.query.get("reset") == "done" else ""


async def _reset(request: web.Request) -> web.Response:
    settings = request.app[_SETTINGS]
    if not settings.allow_actions:
        raise web.HTTPForbidden(text="the console is read-only (start it with --allow-actions)")
    form = await request.post()
    if not hmac.compare_digest(str(form.get("csrf", "")), settings.csrf):
        raise web.HTTPForbidden(text="stale or missing form value: reload the page")
    if settings.token is not None and not _token_ok(request, form, settings.token):
        raise web.HTTPForbidden(text="wrong or missing token")
    view = _view(request)
    topic, group = request.match_info["topic"], request.match_info["group"]
    target, offset_text = str(form.get("target", "")), str(form.get("offset", "")).strip()
    try:
        offset = int(offset_text) if offset_text else None
        plan = await _in_thread(view.reset_plan, topic, group, target, offset)
    except (InvalidTopicNameError, InvalidGroupNameError):
        raise  # answered by _plain_errors, as on every page
    except (ValueError, KeyError) as error:
        return _bad_request(request, str(error))
    if form.get("confirm") != "yes":
        hidden = {"csrf": settings.csrf}
        if settings.token is not None:
            hidden["token"] = str(form.get("token", ""))
        page = pages.confirm_reset_page(
            topic, group, target, offset_text, plan, hidden, _where(request)
        )
        return _html(page)
    try:
        await _in_thread(view.reset_group, topic, group, plan)
    except Exception as error:  # GroupActiveError, GroupBusyError, ...: say it on the page
        return _html(pages.error_page("Reset refused", str(error), _where(request)), 409)
    raise web.HTTPSeeOther(f"{request.path.rsplit('/', 1)[0]}?reset=done")


def _token_ok(request: web.Request, form: Any, token: str) -> bool:
    given = str(form.get("token", ""))
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        given = header[len("Bearer ") :]
    return hmac.compare_digest(given.encode(), token.encode())


async def _routes(request: web.Request) -> web.Response:
    settings = request.app[_SETTINGS]
    rows = route_rows(request.app[_RATES]) if settings.attached else []
    return _html(pages.routes_page(rows, settings.attached, _where(request)))


async def _api_routes(request: web.Request) -> web.Response:
    settings = request.app[_SETTINGS]
    return web.json_response(route_rows(request.app[_RATES]) if settings.attached else [])


def _registry(settings: ConsoleSettings) -> Any:
    """The /metrics registry, or None without prometheus-client (then /metrics says so)."""
    try:
        from mq_bridge.observability.prometheus import metrics_registry

        roots = [settings.store_root] if settings.store_root is not None else []
        return metrics_registry(roots, routes=settings.attached)
    except Exception as error:  # the extra is missing: the console works without it
        return error


async def _metrics(request: web.Request) -> web.Response:
    from mq_bridge.observability.prometheus import render_metrics

    registry = request.app[_METRICS]
    if isinstance(registry, Exception):
        raise web.HTTPNotImplemented(text=str(registry))
    body, content_type = await _in_thread(render_metrics, registry)
    return web.Response(body=body, headers={"Content-Type": content_type})


def _not_found(request: web.Request, message: str) -> web.Response:
    return _html(pages.error_page("Not found", message, _where(request)), 404)


def _bad_request(request: web.Request, message: str) -> web.Response:
    return _html(pages.error_page("Bad request", message, _where(request)), 400)


class ConsoleServer:
    """The console served on its own event-loop thread (inside ``mq-bridge run``, tests)."""

    def __init__(self, settings: ConsoleSettings, port: int) -> None:
        settings.check()
        self.settings = settings
        self._requested_port = port
        self.port = 0
        #: Requests aiohttp could not parse: one log line and a count each, no traceback.
        self.bad_requests = BadRequests(_LOG, "console")
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="mq-bridge-console")
        self._thread.daemon = True

    @property
    def url(self) -> str:
        host = self.settings.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    def start(self) -> ConsoleServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _start(self) -> None:
        self._runner = web.AppRunner(
            make_app(self.settings), access_log=None, logger=self.bad_requests.server_logger
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.settings.host, self._requested_port)
        await site.start()
        server = site._server  # aiohttp keeps the bound sockets there
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self._requested_port

    def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(30)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if not self._loop.is_closed() and not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> ConsoleServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
