"""The kit's public surface: `__all__`, and what importing it loads (and does not)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import mq_bridge.endpoints.kit as kit


def test_every_public_name_resolves_and_is_documented() -> None:
    assert sorted(kit.__all__) == sorted(set(kit.__all__))
    doc = kit.__doc__ or ""
    for name in kit.__all__:
        assert getattr(kit, name) is not None
        assert f"`{name}`" in doc, f"{name} is missing from the kit's docstring"
    assert set(kit.__all__) <= set(dir(kit))


def test_lazy_names_are_the_modules_own() -> None:
    from mq_bridge.endpoints.kit import event_loop, tls

    assert kit.loop_thread is event_loop.loop_thread
    assert kit.LoopThread is event_loop.LoopThread
    assert kit.TlsOptions is tls.TlsOptions


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        kit.no_such_name  # noqa: B018
    except AttributeError as error:
        assert "no_such_name" in str(error)
    else:
        raise AssertionError("expected AttributeError")


def test_importing_the_kit_loads_no_event_loop_tls_or_driver() -> None:
    script = textwrap.dedent(
        """
        import json, sys
        before = set(sys.modules)
        import mq_bridge.endpoints.kit
        print(json.dumps(sorted(set(sys.modules) - before)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(done.stdout)
    assert "mq_bridge.endpoints.kit.connections" in loaded
    assert "mq_bridge.endpoints.kit.event_loop" not in loaded
    assert "mq_bridge.endpoints.kit.tls" not in loaded
    # (asyncio itself comes with `mq_bridge`: coroutine handlers; the kit adds no loop.)
    not_eager = {"pydantic", "nats", "aio_pika", "aiormq", "paho", "redis"}
    not_eager |= {"aiokafka", "confluent_kafka", "pymongo", "motor", "boto3", "psycopg"}
    assert not [name for name in loaded if name.split(".")[0] in not_eager]
