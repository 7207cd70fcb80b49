# One toolchain, used the same way locally and in CI (.ci/run calls these targets).
PY ?= python

.PHONY: install lint format typecheck test docs check ci

install:
	$(PY) -m pip install -q -e '.[dev]'

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format:
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

typecheck:
	$(PY) -m mypy

test:
	$(PY) -m pytest

docs:  # the documentation site into site/; --strict: a warning (broken link...) fails it
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

check: lint typecheck test
