"""The samples kept in `tests.seed_samples` are still the seeds' text, verbatim.

The seeds are the project's specification documents; they are not in the repository but
beside it (``<repo>/../shared/seeds/``), where only the project's CI checks them out. The
tests that run the samples take them from `tests.seed_samples`, so a clone needs no seeds:
without them this test skips (one reason for all of them, nothing for the reader to do),
except under ``CI=true``, where a missing seed is a broken setup, not a reason to skip.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.seed_samples import SAMPLES, SEEDS

SKIP_REASON = (
    "compares the code samples kept in tests/seed_samples with the project's seed documents "
    "(its specification), which only the project's CI has (beside the clone, ../shared/seeds); "
    "the tests that run the samples ran: nothing to do here"
)


def seed_text(name: str) -> str:
    path = SEEDS / name
    if not path.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"the seed {name} is not at {SEEDS}: CI checks out ../shared beside the clone"
            )
        pytest.skip(SKIP_REASON)
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_kept_sample_is_the_seed_text_verbatim(name: str) -> None:
    seed, code = SAMPLES[name]
    assert code in seed_text(seed), f"{name} differs from its seed {seed}: copy it again"


@pytest.mark.parametrize(
    ("ci", "outcome"), [("", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_without_the_seeds_a_clone_is_told_only_ci_has_them(monkeypatch, tmp_path, ci, outcome):
    monkeypatch.setattr(sys.modules[__name__], "SEEDS", tmp_path / "no-seeds")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome) as stopped:
        seed_text(next(iter(SAMPLES.values()))[0])
    said = str(stopped.value)
    if ci:
        assert str(tmp_path / "no-seeds") in said
    else:
        assert said == SKIP_REASON and "only the project's CI has" in said
        assert str(tmp_path) not in said  # no path the reader could act on
