"""Debian's Chromium, headless, driven by Selenium through the system chromedriver.

Without the browser the tests skip (saying how to install it), except under CI=true, where
a missing browser fails: CI installs it with scripts/install-browser.sh.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

INSTALL_HINT = "install Chromium and its driver: bash scripts/install-browser.sh"


def wait_for_url(driver: Any, ending: str, timeout: float = 30) -> None:
    """Wait until the page at ``...ending`` is the current one (a click navigates later)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(lambda d: d.current_url.endswith(ending))


def find_browser() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def browser_or_skip() -> tuple[str, str]:
    found = find_browser()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no headless browser under CI: {INSTALL_HINT}")
        pytest.skip(INSTALL_HINT)
    return found


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    browser_path, driver_path = browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser_path
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    driver.implicitly_wait(20)  # a loaded machine: find_element waits for the next page
    try:
        yield driver
    finally:
        driver.quit()
