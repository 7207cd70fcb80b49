"""WebSocket echo: our websocket input + `response` vs mq-bridge 1.2.0's.

    .venv/bin/python bench/websocket_bench.py [--duration 10] [--runs 3] [--connections 32]

Each system is a server process running a route ``websocket input -> handler -> response``
whose handler returns the frame unchanged. The load generator is the same for both: one
process of ours with `--connections` clients (the `websockets` library), each sending a
~100 B text frame and waiting for its echo, in a loop, for --duration seconds. Runs
alternate between the systems; the table gives medians of --runs (round trips/s, p99).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_bench import free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]
PYTHON = {
    "ours": str(ROOT / ".venv" / "bin" / "python"),
    "peer": str(ROOT / ".peers" / "mq-bridge" / "bin" / "python"),
}
FRAME = '{"id":12345,"name":"benchmark","items":[1,2,3,4,5],"flag":true,"note":"0123456789abcdef"}'

SERVER = """
import sys
from mq_bridge import Route

config = {
    "input": {"websocket": {"url": f"127.0.0.1:{sys.argv[1]}", "path": "/echo"}},
    "output": {"response": {}},
}
with Route.from_config(config).with_handler(lambda message: message):
    print("ready", flush=True)
    sys.stdin.read()
"""


async def load(port: int, connections: int, duration: float) -> tuple[float, float]:
    """(round trips/s, p99 ms) of `connections` echo loops for `duration` seconds."""
    from websockets.asyncio.client import connect

    latencies: list[float] = []
    stop_at = time.perf_counter() + duration

    async def client() -> None:
        async with connect(f"ws://127.0.0.1:{port}/echo", compression=None) as ws:
            while (start := time.perf_counter()) < stop_at:
                await ws.send(FRAME)
                await ws.recv()
                latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(connections)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return len(latencies) / elapsed, latencies[int(len(latencies) * 0.99)] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--systems", default="ours,peer")
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    results: dict[str, list[tuple[float, float]]] = {s: [] for s in systems}
    with tempfile.TemporaryDirectory() as workdir:
        for run in range(args.runs):
            for system in systems:
                port = free_port()
                env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                if system == "ours":
                    env["PYTHONPATH"] = str(ROOT / "src")
                process = subprocess.Popen(
                    [PYTHON[system], "-c", SERVER, str(port)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=workdir, env=env,
                )  # fmt: skip
                try:
                    wait_listening(port)
                    asyncio.run(load(port, args.connections, 1))  # warm-up
                    rate, p99 = asyncio.run(load(port, args.connections, args.duration))
                finally:
                    assert process.stdin is not None
                    process.stdin.close()
                    process.wait(20)
                results[system].append((rate, p99))
                print(f"run {run + 1} {system:6} {rate:9.0f} round trips/s  p99 {p99:7.2f} ms")
    print(f"\nmedians of {args.runs} ({args.duration:g} s, {args.connections} connections)")
    medians = {
        s: (statistics.median(r for r, _ in v), statistics.median(p for _, p in v))
        for s, v in results.items()
    }
    for system, (rate, p99) in medians.items():
        print(f"{system:6} {rate:9.0f} round trips/s  p99 {p99:7.2f} ms")
    if "ours" in medians and "peer" in medians:
        print(f"ours / peer: {medians['ours'][0] / medians['peer'][0]:.2f}x")


if __name__ == "__main__":
    main()
