"""cookie_jar: HTTP sessions: keep the cookies servers set and send them back on later requests.

Input and output, as in mq-bridge (0.3.2 and 1.2.0, ``CookieJarMiddleware``). A session
holds cookies and captured values; each middleware has one of its own, or shares one with
every cookie_jar of the process that names the same `shared_scope` (so a route that logs in
and another that calls the API with that login can share it).

What it reads, from every message going out and every message or response coming in:

- the ``cookie`` metadata (`cookie_metadata_key`): each ``name=value`` is kept;
- the ``set-cookie`` metadata (`set_cookie_metadata_key`, an HTTP response's header): the
  cookie is kept, or removed when ``Max-Age`` is 0 or less; several lines, several cookies;
- the metadata named in `capture_metadata_keys` (a token a login answered with, say): kept
  as values of the session.

What it adds:

- on an **output**, to each message sent without a ``cookie`` metadata: the session's
  cookies as one (``a=1; b=2``), which the http output sends as the ``Cookie`` header;
  and each `inject_metadata` key the message lacks, from the session value (or cookie) it
  names: ``{authorization: access_token}``; ``value.<name>`` and ``cookie.<name>`` (also
  with the `export_metadata_prefix` in front) name a value or a cookie explicitly;
- with `export_metadata_prefix`, to every message (and response) it sees: the whole
  session as ``<prefix>cookie.<name>`` and ``<prefix>value.<name>`` metadata.

On an output the jar works next to the endpoint, whatever its place in ``middlewares``:
below a route's handler (it must see the message the handler made, and a handler that
returns a new message must still carry the cookies) and right above the http client, from
which it takes each response: on an http output every send is a request whose response it
reads (`request`, the same exchange), one message at a time so that a cookie set by one
response goes with the next request. On other outputs it only adds metadata.

Options::

    middlewares:
      - cookie_jar:
          shared_scope: api-session          # share the session by this name
          capture_metadata_keys: [x-token]   # keep these response headers too
          inject_metadata: {authorization: x-token}
          export_metadata_prefix: "session."
          max_cookies: 256

Differences from the peers: 1.2.0's rules (``Max-Age`` removal, several ``Set-Cookie``
lines, `max_cookies`, prefixed `inject_metadata` names), which 0.3.2 lacks. Our http output
keeps one ``set-cookie`` header of a response (the last), as 0.3.2's does; 1.2.0's keeps
every one, one a line.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.errors import SendError
from mq_bridge.message import Message
from mq_bridge.middleware._cookie_sessions import (
    SessionStore,
    render_cookie_header,
    session_store,
)
from mq_bridge.middleware.base import InputMiddleware, OutputMiddleware

__all__ = ["OPTIONS", "CookieJarOptions", "wrap_input", "wrap_output"]


class CookieJarOptions(Options):
    """Cookie/session jar: reads cookie and set-cookie metadata, keeps the session's cookies
    and sends them back on later requests; can capture, inject and export other values."""

    model_config = {**Options.model_config, "title": "CookieJarMiddleware"}

    shared_scope: str | None = Field(
        None,
        description="Share one session with every cookie_jar of the process that names this "
        "scope (across endpoints and routes). Without it the middleware has its own.",
    )
    cookie_metadata_key: str = Field(
        "cookie", description="Metadata key of the HTTP Cookie header (read and written)."
    )
    set_cookie_metadata_key: str = Field(
        "set-cookie", description="Metadata key of the HTTP Set-Cookie header (read)."
    )
    capture_metadata_keys: list[str] = Field(
        default_factory=list,
        description="Further metadata keys whose values are kept in the session.",
    )
    export_metadata_prefix: str | None = Field(
        None,
        description="Add the session to each message as metadata: PREFIXcookie.<name> for "
        "cookies, PREFIXvalue.<name> for captured values.",
    )
    inject_metadata: dict[str, str] = Field(
        default_factory=dict,
        description="Outgoing metadata key -> session value name, added when the message "
        'lacks the key: {"authorization": "access_token"}.',
    )
    max_cookies: int = Field(
        256,
        ge=0,
        description="Cookies kept per session; the least recently set are dropped "
        "(mq-bridge 1.2.0).",
    )


OPTIONS = CookieJarOptions


class _Session:
    """What the jar does to a message, given its options and store."""

    def __init__(self, options: CookieJarOptions, store: SessionStore) -> None:
        self._options = options
        self._store = store
        self._value_keys = tuple(options.capture_metadata_keys)

    def outgoing(self, message: Message) -> Message:
        """Capture from `message`, then add the cookies, the injected keys, the export."""
        self._capture(message)
        metadata = message.metadata_view
        cookies, values = self._store.snapshot()
        added: dict[str, str] = {}
        key = self._options.cookie_metadata_key
        header = render_cookie_header(cookies)
        if key not in metadata and header is not None:
            added[key] = header
        for target, name in self._options.inject_metadata.items():
            value = None if target in metadata else self._lookup(name, cookies, values)
            if value is not None:
                added[target] = value
        added.update(self._export(cookies, values))
        return message.with_metadata(added) if added else message

    def incoming(self, message: Message) -> Message:
        """Capture from a received message (or response), then add the export."""
        self._capture(message)
        if self._options.export_metadata_prefix is None:
            return message
        exported = self._export(*self._store.snapshot())
        return message.with_metadata(exported) if exported else message

    def _capture(self, message: Message) -> None:
        options = self._options
        self._store.capture(
            message.metadata_view,
            options.cookie_metadata_key,
            options.set_cookie_metadata_key,
            self._value_keys,
            options.max_cookies,
        )

    def _export(self, cookies: dict[str, str], values: dict[str, str]) -> dict[str, str]:
        prefix = self._options.export_metadata_prefix
        if prefix is None:
            return {}
        exported = {f"{prefix}cookie.{name}": value for name, value in cookies.items()}
        exported.update((f"{prefix}value.{name}", value) for name, value in values.items())
        return exported

    def _lookup(self, name: str, cookies: dict[str, str], values: dict[str, str]) -> str | None:
        """The session value or cookie `name` stands for (1.2.0's rules)."""
        prefix = self._options.export_metadata_prefix
        bare = name[len(prefix) :] if prefix and name.startswith(prefix) else name
        kind, _, rest = bare.partition(".")
        explicit = {"cookie": cookies, "value": values}.get(kind, {}).get(rest)
        if explicit is not None:
            return explicit
        return values.get(name, cookies.get(name))


class CookieJarOutput(OutputMiddleware):
    """Adds the session to what is sent; reads each response of an http output."""

    def __init__(self, inner: OutputEndpoint, session: _Session) -> None:
        super().__init__(inner)
        self._session = session
        self._answers = _answers_every_send(inner)

    def send(self, messages: Sequence[Message]) -> None:
        outgoing = [self._session.outgoing(message) for message in messages]
        if not self._answers:
            self.inner.send(outgoing)
            return
        failures: dict[int, BaseException] = {}
        for index, message in enumerate(outgoing):
            try:
                self._session.incoming(self.inner.request(message, None))
            except Exception as error:
                if len(outgoing) == 1:
                    raise
                failures[index] = error
        if failures:
            raise SendError(failures)

    def send_one(self, message: Message) -> None:
        self.send((message,))

    def request(self, message: Message, timeout: float | None) -> Message:
        reply = self.inner.request(self._session.outgoing(message), timeout)
        return self._session.incoming(reply)


class CookieJarInput(InputMiddleware):
    """Captures from every received message (and adds the export)."""

    def __init__(self, inner: InputEndpoint, session: _Session) -> None:
        super().__init__(inner)
        self._session = session

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        batch = self.inner.receive(max_messages, timeout)
        if not batch:
            return batch
        return Batch([self._session.incoming(m) for m in batch.messages], batch)

    def ack(self, batch: Batch) -> None:
        self.inner.ack(batch.token)

    def nack(self, batch: Batch) -> None:
        self.inner.nack(batch.token)


def _answers_every_send(endpoint: OutputEndpoint) -> bool:
    """Whether `endpoint` answers each send with a response its `request` returns (the
    same exchange): our http client output."""
    from mq_bridge.endpoints.http.output import HttpOutput  # no aiohttp import yet

    return isinstance(endpoint, HttpOutput)


def wrap_output(
    inner: OutputEndpoint, options: CookieJarOptions, context: BuildContext
) -> OutputEndpoint:
    """Put the jar right above the endpoint under `inner` (see the module docstring)."""
    session = _Session(options, session_store(options.shared_scope))
    if not isinstance(inner, OutputMiddleware):
        return CookieJarOutput(inner, session)
    node = inner
    while isinstance(node.inner, OutputMiddleware) and not isinstance(node.inner, CookieJarOutput):
        node = node.inner
    node.inner = CookieJarOutput(node.inner, session)
    return inner


def wrap_input(
    inner: InputEndpoint, options: CookieJarOptions, context: BuildContext
) -> InputEndpoint:
    """Wrap `inner` so the session captures from (and exports onto) what it receives."""
    return CookieJarInput(inner, _Session(options, session_store(options.shared_scope)))
