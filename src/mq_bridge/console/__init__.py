"""The web console: a twainmq store's topics, messages and groups, and live routes.

    mq-bridge console --root DIR [--port 8470] [--allow-actions [--token T]]
    mq-bridge run CONFIG --console-port 8470 [--store DIR]     (adds this process's routes)

Server-rendered pages (aiohttp, the ``console`` extra) with a little JavaScript on the
routes page; ``/metrics`` serves the Prometheus text format. Listens on 127.0.0.1 unless
told otherwise, is read-only unless ``--allow-actions``, and then needs a token when it
listens beyond loopback. See docs/console.md.
"""

from __future__ import annotations

from mq_bridge.console.app import ConsoleServer, ConsoleSettings, make_app

__all__ = ["ConsoleServer", "ConsoleSettings", "make_app"]
