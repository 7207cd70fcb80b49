"""HTTP request-reply: our http input + `response` vs mq-bridge 1.2.0, aiohttp, FastAPI.

    .venv/bin/python bench/http_bench.py [--duration 10] [--runs 3] [--systems ours,peer,...]

Each system is a server in its own process answering ``POST /bench`` with a trivial Python
handler (the request's JSON body in, ``{"ok": true}`` out):

    ours      Route(http input -> handler -> response), this repository's mq_bridge
    peer      the same route on mq-bridge 1.2.0 (`.peers/mq-bridge`, scripts/peer-venv.sh)
    aiohttp   aiohttp.web alone, one handler (what a hand-written aiohttp service does)
    fastapi   FastAPI on uvicorn (uvloop + httptools, one worker, no access log)
    granian   the same FastAPI app on granian (ASGI, one worker)

FastAPI, uvicorn and granian live in a peer venv (`scripts/peer-venv.sh fastapi`); a
system whose venv is missing is skipped, and the run says so.

The load generator is wrk (``apt-get install wrk``): 2 threads, 64 connections, POST of
~100 B JSON. Runs alternate between the systems (ours, peer, aiohttp, ours, ...) so drift
on a shared machine hits each alike; the table gives medians of --runs for requests/s and
p99 latency, and our ratios to the others.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = {
    "ours": str(ROOT / ".venv" / "bin" / "python"),
    "peer": str(ROOT / ".peers" / "mq-bridge" / "bin" / "python"),
    "aiohttp": str(ROOT / ".venv" / "bin" / "python"),
    "fastapi": str(ROOT / ".peers" / "fastapi" / "bin" / "python"),
    "granian": str(ROOT / ".peers" / "fastapi" / "bin" / "python"),
}
#: How to make a missing venv.
MAKE_VENV = {
    "ours": "make setup (the project venv)",
    "peer": "scripts/peer-venv.sh mq-bridge",
    "aiohttp": "make setup (the project venv)",
    "fastapi": "scripts/peer-venv.sh fastapi",
    "granian": "scripts/peer-venv.sh fastapi",
}
BODY = '{"id":12345,"name":"benchmark","items":[1,2,3,4,5],"flag":true,"note":"0123456789abcdef"}'

ROUTE_SERVER = """
import sys, time
from mq_bridge import Route

def handle(message):
    message.json()
    return message.with_payload(b'{"ok":true}')

port = int(sys.argv[1])
config = {
    "input": {"http": {"url": f"127.0.0.1:{port}", "path": "/bench", "method": "POST"}},
    "output": {"response": {}},
}
with Route.from_config(config).with_handler(handle):
    print("ready", flush=True)
    sys.stdin.read()
"""

AIOHTTP_SERVER = """
import sys
from aiohttp import web

async def handle(request):
    await request.json()
    return web.Response(body=b'{"ok":true}', content_type="application/json")

app = web.Application()
app.router.add_post("/bench", handle)
print("ready", flush=True)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""

FASTAPI_APP = """
from fastapi import FastAPI, Request
from fastapi.responses import Response

app = FastAPI()

@app.post("/bench")
async def handle(request: Request) -> Response:
    await request.json()
    return Response(content=b'{"ok":true}', media_type="application/json")
"""

UVICORN_SERVER = (
    FASTAPI_APP
    + """
import sys
import uvicorn

print("ready", flush=True)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=False,
            log_level="warning", loop="uvloop", http="httptools")
"""
)

GRANIAN_SERVER = """
import sys
from granian import Granian
from granian.constants import Interfaces

print("ready", flush=True)
Granian(
    "bench_app:app", address="127.0.0.1", port=int(sys.argv[1]), interface=Interfaces.ASGI,
    workers=1, log_access=False, log_enabled=False,
).serve()
"""

SCRIPTS = {
    "ours": ROUTE_SERVER,
    "peer": ROUTE_SERVER,
    "aiohttp": AIOHTTP_SERVER,
    "fastapi": UVICORN_SERVER,
    "granian": GRANIAN_SERVER,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def start(system: str, port: int, workdir: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if system == "ours":
        env["PYTHONPATH"] = str(ROOT / "src")
    if system == "granian":  # granian imports the app by name, in its worker process
        Path(workdir, "bench_app.py").write_text(FASTAPI_APP)
        env["PYTHONPATH"] = workdir
    process = subprocess.Popen(
        [PYTHON[system], "-c", SCRIPTS[system], str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=workdir,  # not the repository: the peer must not import our src/
        env=env,
    )
    wait_listening(port)
    return process


#: The route servers stop when their stdin closes; the others on SIGTERM.
STOPS_ON_EOF = {"ours", "peer"}


def stop(system: str, process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    if system not in STOPS_ON_EOF:
        process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.terminate()
        process.wait(10)


def run_wrk(port: int, duration: int, script: str) -> tuple[float, float]:
    """(requests/s, p99 ms) of one wrk run."""
    url = f"http://127.0.0.1:{port}/bench"
    done = subprocess.run(
        ["wrk", "-t2", "-c64", f"-d{duration}s", "--latency", "-s", script, url],
        capture_output=True,
        text=True,
        check=True,
        timeout=duration + 30,
    )
    out = done.stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    p99 = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    return rate, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--systems", default="ours,peer,aiohttp,fastapi,granian")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install -y wrk")
    systems = []
    for system in (s for s in args.systems.split(",") if s):
        if Path(PYTHON[system]).exists():
            systems.append(system)
        else:
            print(f"skipping {system}: no venv at {PYTHON[system]} ({MAKE_VENV[system]})")
    results: dict[str, list[tuple[float, float]]] = {s: [] for s in systems}
    with tempfile.TemporaryDirectory() as workdir:
        script = str(Path(workdir) / "post.lua")
        Path(script).write_text(
            'wrk.method = "POST"\n'
            f"wrk.body = '{BODY}'\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
        )
        for run in range(args.runs):
            for system in systems:
                port = free_port()
                process = start(system, port, workdir)
                try:
                    run_wrk(port, 2, script)  # warm-up
                    rate, p99 = run_wrk(port, args.duration, script)
                finally:
                    stop(system, process)
                results[system].append((rate, p99))
                print(f"run {run + 1} {system:8} {rate:10.0f} req/s  p99 {p99:7.2f} ms", flush=True)
    print(f"\nmedians of {args.runs} ({args.duration} s, 2 threads, 64 connections, POST ~100 B)")
    medians = {
        s: (statistics.median(r for r, _ in v), statistics.median(p for _, p in v))
        for s, v in results.items()
    }
    print(f"{'system':10} {'req/s':>10} {'p99 ms':>8}")
    for system, (rate, p99) in medians.items():
        print(f"{system:10} {rate:10.0f} {p99:8.2f}")
    if "ours" in medians:
        ours_rate, ours_p99 = medians["ours"]
        for other, (rate, p99) in medians.items():
            if other != "ours":
                print(f"ours / {other}: {ours_rate / rate:.2f}x req/s, p99 {ours_p99 / p99:.2f}x")


if __name__ == "__main__":
    main()
