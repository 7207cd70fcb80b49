"""The console over HTTP (no browser): figures, paging, access rules, the CLI commands."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from mq_bridge.console import ConsoleServer, ConsoleSettings
from mq_bridge.errors import ConfigError
from tests.console.conftest import AUDIT_MESSAGES, BILLING_COMMITTED, ORDERS_PER_PARTITION
from twainmq import Twain
from twainmq.groups import GroupPaths, describe_group


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def post(
    url: str, fields: dict[str, str], headers: dict[str, str] | None = None
) -> tuple[int, str]:
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def cells(html: str, row_attribute: str, css: str) -> dict[str, str]:
    """``row key -> text`` of the cells of class `css` in rows ``data-<row_attribute>``."""
    found = {}
    for row in re.finditer(rf'<tr data-{row_attribute}="([^"]*)"[^>]*>(.*?)</tr>', html):
        cell = re.search(rf'<td class="n {css}"[^>]*>([^<]*)</td>', row.group(2))
        if cell:
            found[row.group(1)] = cell.group(1).replace(",", "")
    return found


def test_topics_page_shows_each_topics_figures(console: ConsoleServer, store_root: Path) -> None:
    html = get(f"{console.url}/topics")
    store = Twain(store_root)
    assert cells(html, "topic", "partitions") == {"audit": "1", "orders": "3"}
    assert cells(html, "topic", "messages") == {
        "audit": str(AUDIT_MESSAGES),
        "orders": str(ORDERS_PER_PARTITION * 3),
    }
    for name in store.list_topics():
        described = store.describe_topic(name)
        assert f'data-bytes="{described.bytes}"' in html
    assert "9.5 MiB" in html  # orders' retention
    assert "forever" in html  # audit's


def test_topic_page_shows_partitions(console: ConsoleServer, store_root: Path) -> None:
    html = get(f"{console.url}/topics/orders")
    described = Twain(store_root).describe_topic("orders")
    ends = cells(html, "partition", "end")
    assert ends == {str(p.partition): str(p.end_offset) for p in described.partitions}
    assert set(ends.values()) == {str(ORDERS_PER_PARTITION)}


def test_messages_are_paged_newest_first(console: ConsoleServer) -> None:
    base = f"{console.url}/topics/orders/messages?partition=1&size=20"
    first = cells(get(base), "offset", "offset")
    assert list(first) == [str(o) for o in range(ORDERS_PER_PARTITION - 1, 24, -1)]
    second = get(f"{base}&page=1")
    assert list(cells(second, "offset", "offset")) == [str(o) for o in range(24, 4, -1)]
    last = get(f"{base}&page=2")
    assert list(cells(last, "offset", "offset")) == [str(o) for o in range(4, -1, -1)]
    assert 'id="older"' not in last
    assert "<pre>order 1</pre>" in last  # partition 1 holds 1, 4, 7, ...: offset 0 is "order 1"
    empty = get(f"{base}&page=3")
    assert 'id="messages-empty"' in empty and "No messages on this page" in empty


def test_undecodable_values_are_shown_as_hex(console: ConsoleServer) -> None:
    html = get(f"{console.url}/topics/audit/messages?partition=0")
    assert "&lt;8 bytes&gt; ff0062696e617279" in html
    assert "<pre>audit 6</pre>" in html


def test_groups_pages_show_commits_and_lag(console: ConsoleServer, store_root: Path) -> None:
    store = Twain(store_root)
    described = describe_group(
        GroupPaths.of(store_root, "orders", "billing"), store.end_offsets("orders")
    )
    total_lag = sum(p.lag for p in described.partitions.values())
    assert total_lag == ORDERS_PER_PARTITION * 3 - BILLING_COMMITTED
    listing = get(f"{console.url}/groups")
    assert cells(listing, r'topic="orders" data-group', "lag") == {"billing": str(total_lag)}
    html = get(f"{console.url}/groups/orders/billing")
    committed = cells(html, "partition", "committed")
    assert committed == {str(p): str(lag.committed) for p, lag in described.partitions.items()}
    assert cells(html, "partition", "lag") == {
        str(p): str(lag.lag) for p, lag in described.partitions.items()
    }


def test_topic_page_shows_the_groups_reading_it_with_lag_per_partition(
    console: ConsoleServer, store_root: Path
) -> None:
    store = Twain(store_root)
    described = describe_group(
        GroupPaths.of(store_root, "orders", "billing"), store.end_offsets("orders")
    )
    html = get(f"{console.url}/topics/orders")
    row = re.search(r'<tr data-group="billing">(.*?)</tr>', html)
    assert row, html
    lags = dict(re.findall(r'<td class="n lag" data-partition="(\d+)"[^>]*>([\d,]+)<', row[1]))
    assert lags == {str(p): f"{lag.lag:,}" for p, lag in described.partitions.items()}
    total = sum(lag.lag for lag in described.partitions.values())
    assert f'<td class="n total-lag">{total:,}</td>' in row[1]
    assert f'title="committed {described.partitions[0].committed:,} of ' in row[1]
    assert 'href="/groups/orders/billing"' in row[1]
    audit = get(f"{console.url}/topics/audit")  # nobody reads it
    assert 'id="topic-groups-empty"' in audit and "No consumer group has read this topic" in audit


def test_an_empty_table_says_what_to_do(tmp_path: Path) -> None:
    from mq_bridge.observability.counters import reset_route_counters

    root = tmp_path / "empty-store"
    Twain(root)  # a store without topics
    reset_route_counters()  # no route of an earlier test in this process
    with ConsoleServer(ConsoleSettings(store_root=root, attached=True), 0) as server:
        topics = get(f"{server.url}/topics")
        groups = get(f"{server.url}/groups")
        routes = get(f"{server.url}/routes")
    assert 'id="topics-empty"' in topics
    assert f"twainmq --root {root} create NAME -p 4" in topics
    assert 'id="groups-empty"' in groups and "No consumer groups yet" in groups
    assert 'id="routes-empty"' in routes and "No routes in this process yet" in routes


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match
    return match.group(1)


def test_reset_asks_to_confirm_then_resets(console: ConsoleServer, store_root: Path) -> None:
    page = get(f"{console.url}/groups/orders/billing")
    url = f"{console.url}/groups/orders/billing/reset"
    fields = {"csrf": _csrf(page), "target": "offset", "offset": "5"}
    status, review = post(url, fields)
    assert status == 200 and 'id="reset-confirm"' in review
    assert cells(review, "partition", "new") == {"0": "5", "1": "5", "2": "5"}
    paths = GroupPaths.of(store_root, "orders", "billing")
    ends = Twain(store_root).end_offsets("orders")
    assert {p.committed for p in describe_group(paths, ends).partitions.values()} != {5}
    status, done = post(url, {**fields, "confirm": "yes"})
    assert status == 200 and "offsets reset" in done  # after the redirect
    assert {p.committed for p in describe_group(paths, ends).partitions.values()} == {5}


def test_reset_refuses_without_the_form_value_and_out_of_range(console: ConsoleServer) -> None:
    url = f"{console.url}/groups/orders/billing/reset"
    status, _ = post(url, {"target": "start", "confirm": "yes"})
    assert status == 403
    csrf = _csrf(get(f"{console.url}/groups/orders/billing"))
    status, text = post(url, {"csrf": csrf, "target": "offset", "offset": "999"})
    assert status == 400 and "outside partition" in text


def test_reset_of_an_active_group_is_refused(console: ConsoleServer, store_root: Path) -> None:
    consumer = Twain(store_root).consumer("orders", group="billing")
    try:
        consumer.poll_many(1, timeout=5)
        csrf = _csrf(get(f"{console.url}/groups/orders/billing"))
        url = f"{console.url}/groups/orders/billing/reset"
        status, text = post(url, {"csrf": csrf, "target": "start", "confirm": "yes"})
        assert status == 409 and "Reset refused" in text
    finally:
        consumer.close()


def test_read_only_console_has_no_actions(read_only_console: ConsoleServer) -> None:
    page = get(f"{read_only_console.url}/groups/orders/billing")
    assert "reset-form" not in page
    url = f"{read_only_console.url}/groups/orders/billing/reset"
    status, text = post(url, {"target": "start", "confirm": "yes"})
    assert status == 403 and "read-only" in text


def test_actions_beyond_loopback_need_a_token(store_root: Path) -> None:
    settings = ConsoleSettings(store_root=store_root, allow_actions=True, host="0.0.0.0")
    with pytest.raises(ConfigError, match="token"):
        settings.check()
    ConsoleSettings(store_root=store_root, allow_actions=False, host="0.0.0.0").check()
    with_token = ConsoleSettings(store_root=store_root, allow_actions=True, token="s3cret")
    with ConsoleServer(with_token, 0) as server:
        page = get(f"{server.url}/groups/orders/billing")
        assert 'name="token"' in page
        url = f"{server.url}/groups/orders/billing/reset"
        fields = {"csrf": _csrf(page), "target": "start"}
        assert post(url, {**fields, "token": "wrong"})[0] == 403
        assert post(url, fields, {"Authorization": "Bearer s3cret"})[0] == 200
        assert post(url, {**fields, "token": "s3cret"})[0] == 200


def test_console_serves_store_metrics(console: ConsoleServer) -> None:
    text = get(f"{console.url}/metrics")
    assert 'twainmq_group_lag_messages{group="billing"' in text
    assert re.search(r'twainmq_partition_end_offset\{[^}]*topic="orders"[^}]*\} 45\.0', text)


class Command:
    """``python -m mq_bridge ARGS`` in the background; its stderr lines collected."""

    def __init__(self, args: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mq_bridge", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                match = re.search(pattern, line)
                if match:
                    return match
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in {self.lines}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self._reader.join(10)


def test_console_command_serves_a_store(store_root: Path) -> None:
    command = Command(["console", "--root", str(store_root), "--port", "0"])
    try:
        url = command.wait_for(r"console at (http://\S+)/ \(read-only\)").group(1)
        assert 'data-topic="orders"' in get(f"{url}/topics")
    finally:
        status = command.stop()
    assert status == 0, command.lines


def test_run_serves_metrics_and_the_console_with_live_routes(
    store_root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    config = tmp_path / "bridge.yaml"
    config.write_text(
        "routes:\n"
        "  copy:\n"
        f"    input: {{twain: {{root: '{store_root}', topic: orders, group: copier}}}}\n"
        f"    output: {{file: {{path: '{out}'}}}}\n"
    )
    command = Command(
        ["run", str(config), "--metrics-port", "0", "--console-port", "0",
         "--store", str(store_root), "--progress-interval", "60"]
    )  # fmt: skip
    try:
        metrics = command.wait_for(r"metrics at (http://\S+/metrics)").group(1)
        console = command.wait_for(r"console at (http://\S+)/").group(1)
        total = ORDERS_PER_PARTITION * 3
        needle = f'mq_bridge_route_messages_total{{route="copy",stage="acked"}} {total}.0'
        deadline = time.monotonic() + 60
        while needle not in get(metrics) and time.monotonic() < deadline:
            time.sleep(0.2)
        scraped = get(metrics)
        assert needle in scraped
        assert 'twainmq_group_lag_messages{group="copier",partition="0"' in scraped
        routes = get(f"{console}/routes")
        assert 'data-route="copy"' in routes
        assert f'data-field="received">{total:,}<' in routes
    finally:
        status = command.stop()
    assert status == 0, command.lines
