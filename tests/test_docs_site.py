"""The documentation site builds with ``mkdocs build --strict`` (what ``make docs`` runs).

Strict: a broken link, a page missing from the nav, an unknown anchor, an API reference
(``::: name``) that does not resolve or any other warning fails the build, so it fails here.
The generated reference pages (scripts/docs_hooks.py) are checked against their source.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(target)],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    return target


def test_every_endpoint_and_middleware_has_a_generated_page(site: Path) -> None:
    from mq_bridge.config.schema import catalog

    for kind, plugins in (
        ("endpoints", catalog().endpoints),
        ("middleware", catalog().middlewares),
    ):
        pages = {page.stem for page in (site / "reference" / kind).glob("*.html")}
        assert pages == {*plugins, "index"}


def test_an_endpoint_page_lists_every_option_with_its_default(site: Path) -> None:
    from mq_bridge.config.schema import catalog

    page = (site / "reference" / "endpoints" / "nats.html").read_text(encoding="utf-8")
    for option in catalog().endpoints["nats"].schema["properties"]:
        assert f"<code>{option}</code>" in page, option
    assert "<code>tls.ca_file</code>" in page  # nested options are flattened
    assert 'href="../../endpoints/http.html"' in (
        site / "reference" / "endpoints" / "http.html"
    ).read_text(encoding="utf-8")  # the hand-written guide is linked


def test_the_cli_page_has_every_subcommand(site: Path) -> None:
    page = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    for command in (
        "mq-bridge run",
        "mq-bridge consume",
        "twainmq groups describe",
        "twainmq check",
    ):
        assert command in page, command


def test_the_api_reference_is_rendered_from_docstrings(site: Path) -> None:
    page = (site / "reference" / "twainmq.html").read_text(encoding="utf-8")
    assert "write_message" in page and "create_topic" in page
    page = (site / "reference" / "mq_bridge.html").read_text(encoding="utf-8")
    assert "from_config" in page


def test_an_endpoint_sharing_a_package_links_that_package_guide(site: Path) -> None:
    """`redis_streams` lives in the redis package, whose guide is endpoints/redis.md (the
    navigation links every guide from every page: the guide sentence is what is checked)."""
    page = (site / "reference" / "endpoints" / "redis_streams.html").read_text(encoding="utf-8")
    guide = 'The guide, with semantics and examples: <a href="../../endpoints/redis.html">'
    assert guide in page
