"""The samples kept in `tests.seed_samples` are still the seeds' text, verbatim.

The seeds sit beside the repository (``<repo>/../shared/seeds/``). Without them this test
skips, except under ``CI=true``: CI checks the seeds out beside the clone, so a missing seed
there is a broken setup, not a reason to skip.
"""

from __future__ import annotations

import os

import pytest

from tests.seed_samples import SAMPLES, SEEDS


def seed_text(name: str) -> str:
    path = SEEDS / name
    if not path.is_file():
        message = f"the seed {name} is not at {SEEDS} (beside the repository)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must check out ../shared beside the clone")
        pytest.skip(message)
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_kept_sample_is_the_seed_text_verbatim(name: str) -> None:
    seed, code = SAMPLES[name]
    assert code in seed_text(seed), f"{name} differs from its seed {seed}: copy it again"
