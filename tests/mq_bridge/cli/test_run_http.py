"""``mq-bridge run`` of an http service in a real child process, stopped with Ctrl-C.

A clean stop answers the requests in flight and exits 0. A request the handler failed for
good was answered (500, with why): its client holds it and decides, so it is not a
message the run dropped either -- but the runtime still counts it as dropped (exit 3):
see `test_a_request_answered_with_its_failure_is_not_a_drop`.
"""

from __future__ import annotations

import http.client
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

from tests.helpers import free_port
from tests.mq_bridge.cli.helpers import spawn

CONFIG = """\
routes:
  quote:
    concurrency: 4
    input:
      http: {{url: "127.0.0.1:{port}", path: /quote, method: POST}}
    output:
      response: {{}}
"""

HANDLER = """\
import pathlib
import time

from mq_bridge import NonRetryableError


def quote(message):
    order = message.json()
    if order.get("sku") == "plum":
        raise NonRetryableError("unknown sku 'plum'")
    if order.get("sleep"):
        pathlib.Path(f"started-{order['n']}").touch()  # with the handler now
        time.sleep(order["sleep"])
    return {"total": 2 * order["quantity"]}
"""


def _post(port: int, body: str, answers: list[tuple[int, bytes]]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/quote", body=body)
        response = connection.getresponse()
        answers.append((response.status, response.read()))
    except OSError as error:
        answers.append((0, repr(error).encode()))
    finally:
        connection.close()


def _serve(tmp_path: Path) -> tuple[int, subprocess.Popen[str]]:
    port = free_port()
    (tmp_path / "service.yaml").write_text(CONFIG.format(port=port))
    (tmp_path / "handlers.py").write_text(textwrap.dedent(HANDLER))
    child = spawn("run", "service.yaml", "--handler", "handlers:quote", "-q", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answers: list[tuple[int, bytes]] = []
        _post(port, '{"quantity": 1}', answers)
        if answers[0][0] == 200:
            return port, child
        time.sleep(0.1)
    child.kill()
    raise AssertionError(f"the service did not answer: {child.communicate()}")


def test_ctrl_c_answers_the_requests_in_flight_and_exits_0(tmp_path: Path) -> None:
    port, child = _serve(tmp_path)
    answers: list[tuple[int, bytes]] = []
    bodies = [f'{{"quantity": 3, "sleep": 1.5, "n": {n}}}' for n in range(4)]
    clients = [threading.Thread(target=_post, args=(port, body, answers)) for body in bodies]
    for client in clients:
        client.start()
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("started-*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(list(tmp_path.glob("started-*"))) == 4, "the four never reached the handler"
    child.send_signal(signal.SIGINT)
    for client in clients:
        client.join(30)
    _out, err = child.communicate(timeout=60)
    assert answers == [(200, b'{"total":6}')] * 4, err
    assert child.returncode == 0, err


def test_a_request_answered_with_its_failure_is_not_a_drop(tmp_path: Path) -> None:
    port, child = _serve(tmp_path)
    answers: list[tuple[int, bytes]] = []
    _post(port, '{"sku": "plum", "quantity": 1}', answers)
    assert answers == [(500, b"unknown sku 'plum'")]
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
