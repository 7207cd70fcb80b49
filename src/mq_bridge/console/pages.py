"""The console's HTML: small server-rendered pages, one function each (no template engine).

Every value goes through `esc`. Tables carry ``id``s and ``data-*`` attributes so that
scripts and the browser tests find a figure without parsing prose. A table without rows
says, in one row, why and what to do. The messages table fits the window (fixed columns,
long values wrapped, a metadata value past `MAX_METADATA_SHOWN` characters cut with the
whole of it in its ``title``), so it holds at 1280 px.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mq_bridge.console.views import MessageRow
from mq_bridge.observability.store_stats import GroupRow, TopicRow

__all__ = [
    "confirm_reset_page",
    "error_page",
    "group_page",
    "groups_page",
    "messages_page",
    "routes_page",
    "topic_page",
    "topics_page",
]

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2733;background:#f6f7f9}
nav{background:#1d2733;padding:.6em 1em}nav a{color:#fff;margin-right:1.2em;text-decoration:none}
nav .where{color:#9fb0c3;float:right}main{padding:1em 1.5em}
table{border-collapse:collapse;background:#fff;margin:.5em 0 1.5em}
th,td{border:1px solid #d9dee4;padding:.3em .7em;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b3261e}.ok{color:#1b7f3b}.muted{color:#6b7785}pre{margin:0;white-space:pre-wrap}
.flash{background:#e6f4ea;border:1px solid #1b7f3b;padding:.5em 1em}
.warn{background:#fdecea;border:1px solid #b3261e;padding:.5em 1em}
form.inline{display:inline}button{cursor:pointer}
tr.empty td{color:#6b7785;font-style:italic}.scroll{overflow-x:auto}
table.fit{width:100%;table-layout:fixed}table.fit td{overflow-wrap:anywhere}
td.meta div{white-space:pre-wrap}
"""

#: The longest metadata value the messages page shows whole (the rest is in its title).
MAX_METADATA_SHOWN = 120


def esc(value: Any) -> str:
    return escape(str(value), quote=True)


def _url(*parts: str) -> str:
    return "/" + "/".join(quote(part, safe="") for part in parts)


def layout(title: str, body: str, where: str, refresh_script: str = "") -> str:
    nav = (
        '<a href="/topics">Topics</a><a href="/groups">Groups</a><a href="/routes">Routes</a>'
        f'<a href="/metrics">/metrics</a><span class="where">{esc(where)}</span>'
    )
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        f"<title>{esc(title)} · mq-bridge console</title><style>{_STYLE}</style></head>"
        f"<body><nav>{nav}</nav><main><h1>{esc(title)}</h1>{body}</main>"
        f"{refresh_script}</body></html>"
    )


def _table(
    table_id: str,
    headers: Sequence[str],
    rows: Iterable[str],
    empty: str = "",
    css_class: str = "",
    columns: str = "",
) -> str:
    """A table; `empty` (HTML) is its one row when `rows` has none, `columns` its
    ``<colgroup>``."""
    head = "".join(
        f'<th class="n">{esc(h[1:])}</th>' if h.startswith("#") else f"<th>{esc(h)}</th>"
        for h in headers
    )
    body = "".join(rows)
    if not body and empty:
        body = (
            f'<tr class="empty"><td colspan={len(headers)} id="{table_id}-empty">{empty}</td></tr>'
        )
    classes = f' class="{css_class}"' if css_class else ""
    return f'<table id="{table_id}"{classes}>{columns}<tr>{head}</tr>{body}</table>'


def _num(name: str, value: Any) -> str:
    shown = f"{value:,}" if isinstance(value, int) else esc(value)
    return f'<td class="n {name}">{shown}</td>'


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:,} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return str(count)


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def _retention(row: TopicRow) -> str:
    if row.description is None:
        return ""
    config = row.description.config
    parts = []
    if config.retention_bytes is not None:
        parts.append(_size(config.retention_bytes))
    if config.retention_seconds is not None:
        parts.append(_duration(config.retention_seconds))
    return " / ".join(parts) or "forever"


def topics_page(rows: Sequence[TopicRow], where: str, root: Path | None = None) -> str:
    body = []
    for row in rows:
        link = f'<a href="{_url("topics", row.name)}">{esc(row.name)}</a>'
        if row.description is None:
            body.append(
                f'<tr data-topic="{esc(row.name)}"><td>{link}</td>'
                f'<td colspan=6 class="bad">{esc(row.error)}</td></tr>'
            )
            continue
        parts = row.description.partitions
        body.append(
            f'<tr data-topic="{esc(row.name)}"><td>{link}</td>'
            + _num("partitions", len(parts))
            + _num("messages", row.description.messages)
            + _num("end", sum(p.end_offset for p in parts))
            + f'<td class="n bytes" data-bytes="{row.description.bytes}">'
            f"{_size(row.description.bytes)}</td>"
            + _num("segments", sum(len(p.segments) for p in parts))
            + f'<td class="retention">{esc(_retention(row))}</td></tr>'
        )
    headers = ["Topic", "#Partitions", "#Messages", "#End offsets (sum)", "#Bytes", "#Segments"]
    store = f" --root {root}" if root is not None else ""
    empty = (
        f"No topics yet: create one with <code>twainmq{esc(store)} create NAME -p 4</code>, "
        "or run a route or publisher whose <code>twain</code> endpoint has <code>create:</code>."
    )
    table = _table("topics", [*headers, "Retention"], body, empty)
    summary = f'<p class="muted">{len(rows)} topic(s)</p>'
    return layout("Topics", summary + table, where)


def topic_page(row: TopicRow, where: str, groups: Sequence[GroupRow] = ()) -> str:
    if row.description is None:
        return layout(f"Topic {row.name}", f'<p class="bad">{esc(row.error)}</p>', where)
    config = row.description.config
    facts = (
        f"<p>key type <b>{esc(config.key_type)}</b> · segment size {_size(config.segment_bytes)}"
        f" · retention <span id=retention>{esc(_retention(row))}</span></p>"
    )
    body = []
    for p in row.description.partitions:
        messages_link = (
            f'<a href="{_url("topics", row.name, "messages")}?partition={p.partition}">'
            "latest messages</a>"
        )
        problems = "<br>".join(esc(problem) for problem in p.problems)
        body.append(
            f'<tr data-partition="{p.partition}">'
            + _num("partition", p.partition)
            + _num("start", p.start_offset)
            + _num("end", p.end_offset)
            + _num("messages", p.messages)
            + f'<td class="n bytes" data-bytes="{p.bytes}">{_size(p.bytes)}</td>'
            + _num("segments", len(p.segments))
            + f'<td>{messages_link}</td><td class="bad">{problems}</td></tr>'
        )
    headers = ["#Partition", "#Start", "#End", "#Messages", "#Bytes", "#Segments", "", "Problems"]
    partitions = _table("partitions", headers, body)
    groups_table = _topic_groups(row, groups)
    return layout(f"Topic {row.name}", facts + partitions + groups_table, where)


def _topic_groups(row: TopicRow, groups: Sequence[GroupRow]) -> str:
    """The groups reading the topic: lag per partition (committed and end in the title)."""
    count = len(row.description.partitions) if row.description is not None else 0
    body = []
    for group in groups:
        link = f'<a href="{_url("groups", row.name, group.group)}">{esc(group.group)}</a>'
        if group.description is None:
            body.append(
                f'<tr data-group="{esc(group.group)}"><td>{link}</td>'
                f'<td colspan={count + 2} class="bad">{esc(group.error)}</td></tr>'
            )
            continue
        cells = []
        for partition in range(count):
            lag = group.description.partitions.get(partition)
            if lag is None:
                cells.append(f'<td class="n lag" data-partition="{partition}"></td>')
                continue
            committed = "nothing" if lag.committed is None else f"{lag.committed:,}"
            title = f"committed {committed} of {lag.end_offset:,}"
            cells.append(
                f'<td class="n lag" data-partition="{partition}" title="{esc(title)}">'
                f"{lag.lag:,}</td>"
            )
        body.append(
            f'<tr data-group="{esc(group.group)}"><td>{link}</td>'
            + _num("members", group.live_members)
            + _num("total-lag", group.lag)
            + "".join(cells)
            + "</tr>"
        )
    headers = ["Group", "#Live members", "#Lag", *(f"#Lag p{p}" for p in range(count))]
    empty = (
        "No consumer group has read this topic yet: a consumer or route reading it with "
        "<code>group: NAME</code> makes one, and its lag shows here."
    )
    table = _table("topic-groups", headers, body, empty)
    return f'<h2>Consumer groups</h2><div class="scroll">{table}</div>'


def messages_page(
    topic: str, partition: int, page: int, size: int, rows: Sequence[MessageRow], where: str
) -> str:
    base = f"{_url('topics', topic, 'messages')}?partition={partition}&size={size}"
    pager = [f'<a href="{_url("topics", topic)}">back to {esc(topic)}</a>']
    if page > 0:
        pager.append(f'<a id="newer" href="{base}&page={page - 1}">newer</a>')
    if len(rows) == size:
        pager.append(f'<a id="older" href="{base}&page={page + 1}">older</a>')
    body = []
    for row in rows:
        metadata = "".join(_metadata_entry(k, v) for k, v in sorted(row.metadata.items()))
        body.append(
            f'<tr data-offset="{row.offset}">'
            + _num("offset", row.offset)
            + f'<td class="written">{esc(row.timestamp.replace("T", " ", 1))}</td>'
            f'<td class="key">{esc(row.key)}</td>'
            f'<td class="value"><pre>{esc(row.value)}</pre></td>'
            f'<td class="meta muted">{metadata}</td></tr>'
        )
    intro = (
        f'<p>partition {partition}, page <span id="page">{page}</span> (newest first) · '
        + " · ".join(pager)
        + "</p>"
    )
    empty = (
        "No messages on this page: the partition is empty here "
        "(produce some with <code>twainmq produce TOPIC TEXT</code>), or go to newer ones."
    )
    headers = ["#Offset", "Written", "Key", "Value", "Metadata"]
    table = _table("messages", headers, body, empty, "fit", _MESSAGE_COLUMNS)
    return layout(f"{topic}: messages", intro + table, where)


#: The messages table's column widths: the value takes what the others leave.
_MESSAGE_COLUMNS = (
    '<colgroup><col style="width:6em"><col style="width:12.5em"><col style="width:8em">'
    '<col><col style="width:30%"></colgroup>'
)


def _metadata_entry(key: str, value: str) -> str:
    """One ``key=value`` line of the metadata cell; a long value cut, whole in its title."""
    text = f"{key}={value}"
    if len(text) <= MAX_METADATA_SHOWN:
        return f"<div>{esc(text)}</div>"
    return f'<div title="{esc(text)}">{esc(text[: MAX_METADATA_SHOWN - 1])}…</div>'


def groups_page(rows: Sequence[GroupRow], where: str) -> str:
    body = []
    for row in rows:
        link = f'<a href="{_url("groups", row.topic, row.group)}">{esc(row.group)}</a>'
        key = f'data-topic="{esc(row.topic)}" data-group="{esc(row.group)}"'
        if row.description is None:
            body.append(
                f"<tr {key}><td>{esc(row.topic)}</td><td>{link}</td>"
                f'<td colspan=3 class="bad">{esc(row.error)}</td></tr>'
            )
            continue
        body.append(
            f"<tr {key}><td>{esc(row.topic)}</td><td>{link}</td>"
            + _num("generation", row.description.generation)
            + _num("members", row.live_members)
            + _num("lag", row.lag)
            + "</tr>"
        )
    headers = ["Topic", "Group", "#Generation", "#Live members", "#Lag"]
    empty = (
        "No consumer groups yet: a consumer or route that reads a topic with "
        "<code>group: NAME</code> (or <code>twainmq consume TOPIC --group NAME</code>) "
        "makes one."
    )
    return layout("Consumer groups", _table("groups", headers, body, empty), where)


_GROUP_PARTITION_HEADERS = ["#Partition", "#End", "#Committed", "#Lag", "Owner"]


def group_page(row: GroupRow, where: str, actions: str, flash: str = "") -> str:
    described = row.description
    assert described is not None
    members = [
        f'<tr data-member="{esc(m.member_id)}"><td>{esc(m.member_id)}</td>'
        f"<td>{esc(m.host or '')}</td>" + _num("pid", str(m.pid or ""))
        + f'<td class="status {"ok" if m.status.value == "alive" else "bad"}">'
        f"{esc(m.status.value)}</td>"
        f"<td>{esc(', '.join(map(str, m.partitions)))}</td></tr>"
        for m in described.members
    ]  # fmt: skip
    partitions = [
        f'<tr data-partition="{p}">'
        + _num("partition", p)
        + _num("end", lag.end_offset)
        + _num("committed", "-" if lag.committed is None else lag.committed)
        + _num("lag", lag.lag)
        + f"<td>{esc(described.owners.get(p, ''))}</td></tr>"
        for p, lag in described.partitions.items()
    ]
    notice = f'<p class="flash" id="flash">{esc(flash)}</p>' if flash else ""
    body = (
        notice
        + f'<p>topic <b>{esc(row.topic)}</b> · generation <span id="generation">'
        f"{described.generation}</span> · live members <span id=live>{row.live_members}</span>"
        f' · lag <span id="lag">{row.lag:,}</span></p><h2>Members</h2>'
        + _table("members", ["Member", "Host", "#PID", "Status", "Partitions"], members,
                 "No members: nobody reads with this group now (it can be reset).")
        + "<h2>Partitions</h2>"
        + _table("group-partitions", _GROUP_PARTITION_HEADERS, partitions)
        + actions
    )  # fmt: skip
    return layout(f"Group {row.group}", body, where)


def reset_form(topic: str, group: str, csrf: str, needs_token: bool) -> str:
    token = '<label>token <input name="token" type="password"></label> ' if needs_token else ""
    return (
        "<h2>Reset committed offsets</h2>"
        f'<form id="reset-form" method="post" action="{_url("groups", topic, group, "reset")}">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        '<select name="target" id="reset-target"><option value="start">to the oldest kept</option>'
        '<option value="end">to the end (skip everything)</option>'
        '<option value="offset">to offset…</option></select> '
        '<input name="offset" id="reset-offset" type="number" min="0" placeholder="offset"> '
        f'{token}<button type="submit" id="reset-review">Review reset…</button></form>'
        '<p class="muted">Only a group without live members can be reset; the next page '
        "shows the new offsets and asks to confirm.</p>"
    )


def confirm_reset_page(
    topic: str, group: str, target: str, offset: str, plan: dict[int, int], hidden: dict[str, str],
    where: str,
) -> str:  # fmt: skip
    rows = [
        f'<tr data-partition="{p}">' + _num("partition", p) + _num("new", o) + "</tr>"
        for p, o in sorted(plan.items())
    ]
    fields = "".join(
        f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
        for k, v in {**hidden, "target": target, "offset": offset, "confirm": "yes"}.items()
    )
    body = (
        f'<p class="warn">Set the committed offsets of group <b>{esc(group)}</b> on '
        f"<b>{esc(topic)}</b> as below? Its consumers will read from there.</p>"
        + _table("reset-plan", ["#Partition", "#New committed offset"], rows)
        + f'<form id="confirm-form" method="post" action="{_url("groups", topic, group, "reset")}">'
        f'{fields}<button type="submit" id="reset-confirm">Confirm reset</button> '
        f'<a id="reset-cancel" href="{_url("groups", topic, group)}">Cancel</a></form>'
    )
    return layout(f"Reset {group}?", body, where)


_REFRESH = """<script>
// Light JS: refresh the figures every 2 s from /api/routes without reloading the page.
setInterval(async () => {
  try {
    const rows = await (await fetch('/api/routes')).json();
    for (const row of rows) {
      const tr = document.querySelector(`tr[data-route="${CSS.escape(row.route)}"]`);
      if (!tr) { location.reload(); return; }
      for (const cell of tr.querySelectorAll('[data-field]')) {
        const value = row[cell.dataset.field];
        cell.textContent = typeof value === 'number' ? value.toLocaleString() : (value ?? '');
      }
      const health = tr.querySelector('[data-field="health"]');
      if (health) health.className = row.healthy === false ? 'bad' : 'ok';
    }
  } catch (e) { /* the console stopped: keep the last figures */ }
}, 2000);
</script>"""

_ROUTE_FIELDS = (
    "received_per_second", "acked_per_second", "received", "sent", "acked", "in_flight",
    "retried", "errors", "dropped", "dead_lettered",
)  # fmt: skip


def routes_page(rows: Sequence[dict[str, Any]], attached: bool, where: str) -> str:
    if not attached:
        text = (
            '<p class="muted">Not attached to a running bridge: start one with '
            "<code>mq-bridge run CONFIG --console-port N</code> to see its routes here.</p>"
        )
        return layout("Routes", text, where)
    body = []
    for row in rows:
        state = '<span class="ok">running</span>' if row["running"] else "stopped"
        health_class = "ok" if row["healthy"] else "bad"
        when = ""
        if row["last_error_at"]:
            moment = datetime.datetime.fromtimestamp(row["last_error_at"], datetime.timezone.utc)
            when = f" ({moment:%H:%M:%S} UTC)"
        cells = "".join(
            f'<td class="n" data-field="{field}">{row[field]:,}</td>' for field in _ROUTE_FIELDS
        )
        body.append(
            f'<tr data-route="{esc(row["route"])}"><td>{esc(row["route"])}</td><td>{state}</td>'
            f'<td class="{health_class}" data-field="health">{esc(row["health"])}</td>'
            f"<td>{esc(row['input'])} → {esc(row['output'])}</td>{cells}"
            f'<td class="bad" data-field="last_error">{esc(row["last_error"] or "")}{when}'
            "</td></tr>"
        )
    headers = [
        "Route", "State", "Health", "Endpoints", "#In/s", "#Acked/s", "#Received", "#Sent",
        "#Acked", "#In flight", "#Retried", "#Errors", "#Dropped", "#Dead-lettered", "Last error",
    ]  # fmt: skip
    empty = "No routes in this process yet: the config's routes appear here once they start."
    return layout("Routes", _table("routes", headers, body, empty), where, _REFRESH)


def error_page(title: str, message: str, where: str) -> str:
    return layout(title, f'<p class="bad" id="error">{esc(message)}</p>', where)
