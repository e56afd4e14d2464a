"""Starting a senti server on loopback for a measurement, and waiting until it answers: one way for every bench
suite and experiment."""

from __future__ import annotations

import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc: subprocess.Popen, url: str, timeout_s: float = 120.0) -> None:
    """Return once `url` answers 200; RuntimeError (with the server's last output) if it exits or times out."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            output = proc.stderr.read()[-2000:] if proc.stderr else ""
            if proc.poll() is None:
                proc.kill()
            raise RuntimeError(f"the server at {url} did not start: {output}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)


def start_senti(args: list[str], ready: str = "/readyz", env: dict | None = None,
                timeout_s: float = 120.0) -> tuple[subprocess.Popen, str]:
    """(process, base URL) of `senti ARGS --port P` on 127.0.0.1, once `ready` answers 200."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "senti.cli", *args, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    base = f"http://127.0.0.1:{port}"
    wait_ready(proc, base + ready, timeout_s)
    return proc, base
