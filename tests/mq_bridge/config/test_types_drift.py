"""types.py is generated from the schema; this fails when someone forgot to regenerate it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from mq_bridge.config import config_schema

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gen_config_types.py"
TYPES = ROOT / "src" / "mq_bridge" / "config" / "types.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_types", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_types_match_the_schema() -> None:
    expected = generator().render(config_schema())
    assert TYPES.read_text(encoding="utf-8") == expected, (
        "src/mq_bridge/config/types.py is out of date: run python scripts/gen_config_types.py"
    )


def test_every_def_has_a_type_and_the_documented_names_exist() -> None:
    import mq_bridge.config as config

    for name in config_schema()["$defs"]:
        assert hasattr(config, name), name
    for name in ("ConfigDocument", "RouteConfig", "EndpointConfig", "MiddlewareConfig"):
        assert name in config.__all__


@pytest.mark.usefixtures("fakes")
def test_generated_code_for_fake_modules_compiles_and_keeps_optional_keys_optional() -> None:
    text = generator().render(config_schema())
    namespace: dict[str, object] = {}
    exec(compile(text, "types.py", "exec"), namespace)
    source = namespace["SourceConfig"]
    assert source.__required_keys__ == {"queue"}  # type: ignore[attr-defined]
    assert {"prefetch", "durable"} <= source.__optional_keys__  # type: ignore[attr-defined]
    route = namespace["Route"]
    assert route.__required_keys__ == {"input"}  # type: ignore[attr-defined]


@pytest.mark.skipif(
    shutil.which("mypy") is None and not importlib.util.find_spec("mypy"),
    reason="mypy is not installed (pip install -e '.[dev]')",
)
def test_mypy_accepts_the_seed_sample_and_rejects_a_wrong_type(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from mq_bridge.config import ConfigDocument, EndpointConfig\n"
        "config: ConfigDocument = {\n"
        '    "routes": {\n'
        '        "orders": {\n'
        '            "input": {"memory": {"topic": "orders.in", "capacity": 1600}},\n'
        '            "output": {"response": {}},\n'
        '            "batch_size": 128,\n'
        "        }\n"
        "    }\n"
        "}\n"
        'bare: ConfigDocument = {"input": {"memory": {"topic": "t"}}}\n'
        'endpoint: EndpointConfig = {"memory": {"topic": "t"}, "middlewares": [{"retry": {}}]}\n'
        'wrong: ConfigDocument = {"routes": {"r": {"input": {"memory": {"topic": 5}}}}}\n'
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-error-summary",
            "--follow-imports=silent",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(sample),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert errors, result.stdout  # the wrong document is rejected...
    assert all("sample.py:13:" in error for error in errors), result.stdout  # ...only it
