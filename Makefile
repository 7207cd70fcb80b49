# One toolchain, used the same way locally and in CI (.ci/run calls these targets).
PY ?= python

.PHONY: install lint format typecheck test check ci

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

check: lint typecheck test
