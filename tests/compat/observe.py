"""Run the compat scenarios in this interpreter and print their observations as JSON.

    python tests/compat/observe.py [SCENARIO ...]     (all scenarios when none is named)

Run by `test_compat.py` under our venv's python and under mq-bridge-py 0.3.2's.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from pathlib import Path


def main() -> None:
    logging.disable(logging.CRITICAL)  # a scenario's expected errors are not news
    spec = importlib.util.spec_from_file_location(
        "scenarios", Path(__file__).with_name("scenarios.py")
    )
    assert spec is not None and spec.loader is not None
    scenarios = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scenarios)
    names = sys.argv[1:] or list(scenarios.SCENARIOS)
    results = {}
    for name in names:
        try:
            results[name] = scenarios.SCENARIOS[name]()
        except Exception as error:
            results[name] = {"scenario crashed": f"{type(error).__name__}: {error}"}
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
