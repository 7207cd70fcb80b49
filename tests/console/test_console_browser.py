"""The console in a real browser (headless Chromium): pages, links, numbers, a group reset.

Screenshots of each step are saved in the test's temp dir (``screenshots/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mq_bridge import Publisher, Route
from mq_bridge.console import ConsoleServer, ConsoleSettings
from tests.console.browser import wait_for_url
from tests.console.conftest import ORDERS_PER_PARTITION
from tests.helpers import wait_until
from tests.mq_bridge.helpers import unique
from twainmq import Twain
from twainmq.groups import GroupPaths, describe_group


def shot(driver: Any, tmp_path: Path, name: str) -> None:
    folder = tmp_path / "screenshots"
    folder.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(folder / f"{name}.png"))


def numbers(driver: Any, table: str, key: str, css: str) -> dict[str, str]:
    """``data-<key> -> text`` of the ``td.<css>`` cells of table `table`, as shown."""
    from selenium.webdriver.common.by import By

    shown = {}
    for row in driver.find_elements(By.CSS_SELECTOR, f"#{table} tr[data-{key}]"):
        cell = row.find_element(By.CSS_SELECTOR, f"td.{css}")
        shown[row.get_attribute(f"data-{key}")] = cell.text.replace(",", "")
    return shown


def test_browse_topics_partitions_and_messages(
    browser: Any,
    console: ConsoleServer,
    store_root: Path,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    store = Twain(store_root)
    browser.get(f"{console.url}/")
    wait_for_url(browser, "/topics")
    shot(browser, tmp_path, "1-topics")
    expected = {name: store.describe_topic(name) for name in store.list_topics()}
    assert numbers(browser, "topics", "topic", "partitions") == {
        name: str(len(d.partitions)) for name, d in expected.items()
    }
    assert numbers(browser, "topics", "topic", "messages") == {
        name: str(d.messages) for name, d in expected.items()
    }

    browser.find_element(By.LINK_TEXT, "orders").click()
    wait_for_url(browser, "/topics/orders")
    shot(browser, tmp_path, "2-topic")
    assert numbers(browser, "partitions", "partition", "end") == {
        str(p.partition): str(p.end_offset) for p in expected["orders"].partitions
    }
    billing = describe_group(
        GroupPaths.of(store_root, "orders", "billing"), store.end_offsets("orders")
    )
    lags = browser.find_elements(By.CSS_SELECTOR, '#topic-groups tr[data-group="billing"] td.lag')
    assert {cell.get_attribute("data-partition"): cell.text for cell in lags} == {
        str(p): str(lag.lag) for p, lag in billing.partitions.items()
    }
    row = browser.find_element(By.CSS_SELECTOR, '#partitions tr[data-partition="2"]')
    row.find_element(By.LINK_TEXT, "latest messages").click()
    wait_for_url(browser, "?partition=2")
    shot(browser, tmp_path, "3-messages")
    newest = list(numbers(browser, "messages", "offset", "offset"))
    assert newest == [
        str(o) for o in range(ORDERS_PER_PARTITION - 1, ORDERS_PER_PARTITION - 21, -1)
    ]
    first_value = browser.find_element(By.CSS_SELECTOR, "#messages td.value").text
    assert first_value == f"order {3 * (ORDERS_PER_PARTITION - 1) + 2}"  # partition 2's last

    browser.find_element(By.ID, "older").click()
    wait_for_url(browser, "&page=1")
    shot(browser, tmp_path, "4-older")
    assert browser.find_element(By.ID, "page").text == "1"
    older = list(numbers(browser, "messages", "offset", "offset"))
    assert older[0] == str(ORDERS_PER_PARTITION - 21)
    browser.find_element(By.ID, "newer").click()
    wait_for_url(browser, "&page=0")
    assert list(numbers(browser, "messages", "offset", "offset")) == newest


def test_reset_a_group_with_confirmation(
    browser: Any,
    console: ConsoleServer,
    store_root: Path,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    store = Twain(store_root)
    paths = GroupPaths.of(store_root, "orders", "billing")
    before = describe_group(paths, store.end_offsets("orders"))
    browser.get(f"{console.url}/groups")
    shot(browser, tmp_path, "1-groups")
    lag = sum(p.lag for p in before.partitions.values())
    assert numbers(browser, "groups", "group", "lag") == {"billing": str(lag)}

    browser.find_element(By.LINK_TEXT, "billing").click()
    wait_for_url(browser, "/groups/orders/billing")
    shot(browser, tmp_path, "2-group")
    assert numbers(browser, "group-partitions", "partition", "committed") == {
        str(p): str(progress.committed) for p, progress in before.partitions.items()
    }
    Select(browser.find_element(By.ID, "reset-target")).select_by_value("start")
    browser.find_element(By.ID, "reset-review").click()
    browser.find_element(By.ID, "reset-confirm")  # the review page (waits for it)
    shot(browser, tmp_path, "3-confirm")
    assert numbers(browser, "reset-plan", "partition", "new") == {"0": "0", "1": "0", "2": "0"}
    unchanged = describe_group(paths, store.end_offsets("orders"))
    assert unchanged.partitions == before.partitions  # nothing happens before confirming

    browser.find_element(By.ID, "reset-confirm").click()
    wait_for_url(browser, "/groups/orders/billing?reset=done")
    shot(browser, tmp_path, "4-reset")
    assert browser.find_element(By.ID, "flash").text == "offsets reset"
    after = describe_group(paths, store.end_offsets("orders"))
    assert {p.committed for p in after.partitions.values()} == {0}
    assert numbers(browser, "group-partitions", "partition", "lag") == {
        str(p): str(progress.lag) for p, progress in after.partitions.items()
    }
    assert browser.find_element(By.ID, "lag").text == f"{ORDERS_PER_PARTITION * 3:,}"


def test_cancel_leaves_the_group_alone(
    browser: Any,
    console: ConsoleServer,
    store_root: Path,
) -> None:
    from selenium.webdriver.common.by import By

    paths = GroupPaths.of(store_root, "orders", "billing")
    ends = Twain(store_root).end_offsets("orders")
    before = describe_group(paths, ends).partitions
    browser.get(f"{console.url}/groups/orders/billing")
    browser.find_element(By.ID, "reset-review").click()
    browser.find_element(By.ID, "reset-cancel").click()
    wait_for_url(browser, "/groups/orders/billing")
    assert describe_group(paths, ends).partitions == before


def test_live_routes_page_shows_a_running_route(
    browser: Any,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    source, sink = unique("in"), unique("out")
    name = unique("live")
    config = {"routes": {name: {"input": {"memory": {"topic": source}},
                                "output": {"memory": {"topic": sink}}}}}  # fmt: skip
    settings = ConsoleSettings(attached=True)
    with ConsoleServer(settings, 0) as server, Route.from_config(config, name):
        publisher = Publisher.from_config({"memory": {"topic": source}})
        for n in range(25):
            publisher.send_json({"n": n})
        browser.get(f"{server.url}/")
        wait_for_url(browser, "/routes")
        row = f'#routes tr[data-route="{name}"]'

        def shown(field: str) -> str:
            cell = browser.find_element(By.CSS_SELECTOR, f'{row} td[data-field="{field}"]')
            return str(cell.text.replace(",", ""))

        assert wait_until(lambda: shown("acked") == "25", timeout=30)  # the page refreshes itself
        shot(browser, tmp_path, "routes")
        assert shown("received") == "25"
        assert shown("errors") == "0"
        assert "running" in browser.find_element(By.CSS_SELECTOR, row).text


def test_the_messages_table_fits_a_1280_px_window(browser: Any, tmp_path: Path) -> None:
    """Bridge messages with long metadata (an unbroken 300-character value, a long JSON
    payload) and the table still ends inside the window: no column cut off, no sideways
    scroll; a metadata value too long to show whole is cut, with the whole in its title."""
    from selenium.webdriver.common.by import By

    from mq_bridge import Message

    root = tmp_path / "store"
    token = "t" * 300
    endpoint = {"twain": {"root": str(root), "topic": "wide", "create": {"partitions": 1}}}
    with Publisher.from_config(endpoint) as publisher:
        publisher.send_batch(
            Message.from_json(
                {"order": n, "lines": [{"sku": f"sku-{i}"} for i in range(40)]}
            ).with_metadata({"token": token, "traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8})
            for n in range(5)
        )
    with ConsoleServer(ConsoleSettings(store_root=root), 0) as server:
        browser.set_window_size(1280, 900)
        browser.get(f"{server.url}/topics/wide/messages?partition=0")
        browser.find_element(By.CSS_SELECTOR, "#messages tr[data-offset]")
        shot(browser, tmp_path, "messages-1280")
        width = browser.execute_script("return document.documentElement.clientWidth")
        assert 1100 <= width <= 1280
        scroll = browser.execute_script("return document.documentElement.scrollWidth")
        assert scroll <= width, f"the page scrolls sideways: {scroll} px wide in {width}"
        for header in browser.find_elements(By.CSS_SELECTOR, "#messages th"):
            right = browser.execute_script(
                "return arguments[0].getBoundingClientRect().right", header
            )
            assert right <= width, f"the {header.text} column ends at {right} px, past {width}"
        cut = browser.find_element(By.CSS_SELECTOR, "#messages td.meta div[title]")
        assert cut.get_attribute("title") == f"token={token}"
        assert cut.text.endswith("…") and len(cut.text) < 200
