"""Fixtures for the storage engine tests: a fresh store in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from twainmq import Twain


@pytest.fixture
def tmq(tmp_path: Path) -> Twain:
    """A new, empty store."""
    return Twain(tmp_path / "store")
