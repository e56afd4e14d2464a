"""senti.serving.supervisor: several server workers sharing a port, the admin route, ONNX Runtime's spinning
setting, graceful shutdown, rolling reloads and restarts with backoff, on loopback with bounded loads."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import datetime
from unittest.mock import ANY

import httpx
import psutil
import pytest

from senti.serving import Predictor
from tests.helpers import AUTH, KEY, PARITY, ROOT, assert_one_reload_shape, output_of, running_server, start_senti


def _bounded_load(base: str, texts: list[str], requests: int = 40, clients: int = 8) -> list:
    async def main():
        async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=60) as http:
            async def client(worker):
                return [await http.post("/v1/predict", json={"texts": [texts[n % len(texts)]]})
                        for n in range(worker, requests, clients)]
            return [r for rs in await asyncio.gather(*(client(w) for w in range(clients))) for r in rs]

    return asyncio.run(main())


def test_two_workers_share_the_port_and_answer_alike(_exported):
    out, _ = _exported
    texts = [t for _, t in PARITY[:20]]
    expected = {t: p.label for t, p in zip(texts, Predictor.load(out).predict(texts))}
    with running_server(out, "--workers", "2") as (base, proc):
        responses = _bounded_load(base, texts)
        reload = httpx.post(f"{base}/v1/admin/reload", headers=AUTH)
        workers = [p for p in psutil.Process(proc.pid).children(recursive=True) if "python" in p.name().lower()]
    assert [r.status_code for r in responses] == [200] * 40
    got = [(r.request.content, r.json()["predictions"][0]["label"]) for r in responses]
    assert all(label == expected[json.loads(body)["texts"][0]] for body, label in got)
    assert len(workers) >= 2, workers  # one process per worker, each with its own model
    assert reload.status_code == 409 and f"kill -HUP {proc.pid}" in reload.json()["detail"], reload.text


def test_connections_opened_at_once_spread_over_the_workers(_exported):
    """On one shared socket the first worker to wake accepted every connection of a burst (32 of 32 seen), and the
    other worker idled; with a socket per worker (SO_REUSEPORT) the kernel spreads them."""
    out, _ = _exported
    with running_server(out, "--workers", "2") as (base, proc):
        port = int(base.rsplit(":", 1)[1])

        async def burst():
            opened = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(32)))
            await asyncio.sleep(1.0)  # let the workers accept
            owners = {}
            for worker in psutil.Process(proc.pid).children(recursive=True):
                mine = [c for c in worker.net_connections(kind="tcp") if c.laddr and c.laddr.port == port
                        and c.status == psutil.CONN_ESTABLISHED]
                if mine:
                    owners[worker.pid] = len(mine)
            for _, writer in opened:
                writer.close()
            return owners

        owners = asyncio.run(burst())
    assert sum(owners.values()) == 32 and len(owners) == 2 and min(owners.values()) >= 4, owners


def test_the_admin_route_is_off_without_a_key_and_workers_are_bounded_by_the_cores(_exported, tmp_path):
    from fastapi.testclient import TestClient

    from senti.core.runtime import available_cores
    from senti.serving.server import ServerConfig, create_app

    out, _ = _exported
    predictor = Predictor.load(out)
    _, app = create_app(predictor, ServerConfig(), reload=lambda: Predictor.load(out))
    refused = TestClient(app).post("/v1/admin/reload")  # no lifespan: the route refuses before any model work
    assert refused.status_code == 403 and "needs an API key" in refused.json()["detail"]
    too_many = 2 * available_cores() + 1
    done = subprocess.run([sys.executable, "-m", "senti.cli", "serve", "--model", str(out), "--workers",
                           str(too_many), "--port", "0"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and f"--workers {too_many}" in done.stderr and "Traceback" not in done.stderr


def test_ort_spinning_is_a_setting_and_off_by_default_when_serving(_exported):
    out, _ = _exported
    entry = "session.intra_op.allow_spinning"
    assert Predictor.load(out).backend.session.get_session_options().get_session_config_entry(entry) == "1"
    assert Predictor.load(out, ort_spinning=False).backend.session.get_session_options() \
        .get_session_config_entry(entry) == "0"
    texts = [t for _, t in PARITY[:10]]
    for flag in ("--ort-spinning", "--no-ort-spinning"):
        with running_server(out, flag) as (base, _):
            assert {r.status_code for r in _bounded_load(base, texts, requests=16, clients=4)} == {200}


@pytest.mark.parametrize("backend", ["paddle", "onnx"])
def test_sigterm_lets_workers_finish_the_requests_in_flight(_exported, backend):
    """Paddle installs its own SIGTERM handler when it loads, after uvicorn's in a worker process: the worker then
    died mid-request. Every request sent before SIGTERM must be answered."""
    import signal
    import time

    out, _ = _exported
    texts = [t for _, t in PARITY[:8]]
    with running_server(out, "--workers", "2", "--backend", backend, "--threads", "1", "--max-wait-ms", "50") \
            as (base, proc):
        async def main():
            async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=60) as http:
                jobs = [asyncio.create_task(http.post("/v1/predict", json={"texts": texts * 6})) for _ in range(40)]
                await asyncio.sleep(0.3)  # every request sent and queued or being scored
                proc.send_signal(signal.SIGTERM)
                return await asyncio.gather(*jobs, return_exceptions=True)

        started = time.monotonic()
        answers = asyncio.run(main())
        proc.wait(timeout=60)
    failed = [a for a in answers if isinstance(a, Exception) or a.status_code != 200]
    assert failed == [], (len(failed), failed[:3], time.monotonic() - started)


SLOW_LOADING = """
import sys, time
import senti.serving.predictor as predictor

_load = predictor.Predictor.load.__func__


def _slow(cls, *args, **kwargs):
    time.sleep(8)  # a worker loading beside busy clients on two cores took this long
    return _load(cls, *args, **kwargs)


predictor.Predictor.load = classmethod(_slow)  # at import: spawned workers import this script too
if __name__ == "__main__":
    from senti.cli import app

    sys.argv[0] = "senti"
    app()
"""


def test_a_rolling_reload_waits_for_a_worker_that_loads_slowly(_exported, tmp_path):
    """A SIGHUP reload was aborted ("the new worker was not ready in time") whenever a replacement took over
    uvicorn's 5-s health-check timeout to load its model, which a Paddle worker did beside six busy clients."""
    import signal

    script = tmp_path / "slow_senti.py"
    script.write_text(SLOW_LOADING, encoding="utf-8")
    proc, base = start_senti("serve", "--model", str(_exported[0]), "--backend", "onnx", "--threads", "1",
                             "--workers", "2", launcher=(sys.executable, str(script)))
    try:
        def readyz():
            return httpx.get(f"{base}/readyz", headers=AUTH, timeout=30).json()

        _wait_for(lambda: readyz().get("workers", {}).get("in_service") == 2, 90, "both workers in service")
        proc.send_signal(signal.SIGHUP)
        reload = _wait_for(lambda: readyz().get("reload"), 120, "the reload's outcome")
        assert reload["ok"] is True and reload["workers_replaced"] == 2, (reload, output_of(proc)[-2000:])
        assert reload["seconds"] > 16  # two replacements, each 8 s or more to load
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_a_stopping_server_answers_a_request_already_on_a_kept_alive_connection(_exported):
    """On shutdown uvicorn closed every idle keep-alive connection at once: a request the client sent over one in
    that instant was lost (4 keep-alive clients lost 10 of 2,988 requests over two rolling reloads, where each
    retiring worker shuts down so). Now it is answered, with `Connection: close`."""
    import signal
    import socket
    import time

    proc, base = start_senti("serve", "--model", str(_exported[0]), "--backend", "onnx", "--workers", "1")
    port = int(base.rsplit(":", 1)[1])
    body = json.dumps({"texts": ["很好"]}).encode()
    request = (f"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

    def answer(sock) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < int(
                data.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0]):
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
        return data

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(request)
            assert answer(sock).startswith(b"HTTP/1.1 200"), "the first request"
            proc.send_signal(signal.SIGTERM)  # the connection is idle and kept alive
            time.sleep(0.5)
            sock.sendall(request)
            second = answer(sock)
        assert second.startswith(b"HTTP/1.1 200") and b"connection: close" in second.lower(), second[:300]
        proc.wait(timeout=60)  # it still stops (uvicorn raises the SIGTERM it caught again once it has drained)
    finally:
        if proc.poll() is None:
            proc.kill()


def _wait_for(check, timeout: float, what: str):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def test_workers_report_a_failed_reload_and_restart_a_failing_worker_with_backoff(_exported, tmp_path):
    """Under --workers, a SIGHUP reload of a tampered export left /readyz saying `reload: null`, and a worker that
    could not start was restarted every half second. Now /readyz names the failure, the old model keeps serving,
    a failing worker is retried after 1, 2, 4 ... s, and comes back once the export is whole again. Each failed
    attempt is one line in the log: it was a traceback every attempt. /readyz counts the workers in service: the
    test tampered with the export while the second worker was still loading it (one answer from /readyz said
    nothing of it), so that worker failed too, the kill below took the only one serving and /readyz hung."""
    import shutil
    import signal

    from tests.serving.test_export_folder import reverse_vocab

    out = tmp_path / "export"
    shutil.copytree(_exported[0], out)
    original_vocab = (out / "vocab.txt").read_bytes()
    with running_server(out, "--workers", "2", "--threads", "1") as (base, proc):
        def readyz():
            try:
                return httpx.get(f"{base}/readyz", headers=AUTH, timeout=10).json()
            except httpx.TransportError as err:  # say what the server and its workers were doing
                children = [(p.pid, p.status()) for p in psutil.Process(proc.pid).children()]
                raise AssertionError(f"/readyz: {err!r}; children {children}; log:\n{output_of(proc)}") from err

        # start_senti returned when one worker answered; the other may still be loading the export tampered below
        assert _wait_for(lambda: readyz().get("workers", {}).get("in_service") == 2, 60, "both workers in service")
        assert readyz()["workers"] == {"in_service": 2, "of": 2, "failing": False, "at": ANY}
        version = readyz()["model_version"]
        reverse_vocab(out)
        proc.send_signal(signal.SIGHUP)
        reload = _wait_for(lambda: (readyz().get("reload") or None), 90, "the reload's outcome in /readyz")
        assert reload["ok"] is False and "parity" in reload["error"], reload
        assert_one_reload_shape(reload, "SIGHUP")  # the supervisor's record had other keys and epoch seconds
        assert datetime.fromisoformat(readyz()["workers"]["at"]).tzinfo is not None
        answer = httpx.post(f"{base}/v1/predict", headers=AUTH, json={"texts": ["很好"]}, timeout=30)
        assert answer.status_code == 200 and answer.json()["model_version"] == version

        workers = [p for p in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(p.cmdline())]
        workers[0].kill()  # its replacement loads the tampered export, fails, and is retried with backoff
        status = _wait_for(lambda: (w := readyz().get("workers")) and w.get("failures_in_a_row", 0) >= 2 and w,
                           90, "two failed restarts")
        assert status["failing"] is True and "parity" in status["last_error"]
        assert status["next_attempt_in_s"] == 2 ** (status["failures_in_a_row"] - 1)
        assert proc.poll() is None  # the healthy worker kept the server up
        (out / "vocab.txt").write_bytes(original_vocab)
        _wait_for(lambda: readyz().get("workers", {}).get("in_service") == 2, 90, "the worker back in service")
        assert readyz()["workers"]["failing"] is False
        assert httpx.post(f"{base}/v1/predict", headers=AUTH, json={"texts": ["很好"]}, timeout=30).status_code == 200
    log = output_of(proc)
    assert "Traceback" not in log and log.count("could not load the model: ") >= 2, log  # the reload, a restart
