"""Starting a senti server on loopback for a measurement, and waiting until it answers: one way for every bench
suite and experiment."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(command: list[str], env: dict | None = None, cwd: str | None = None) -> subprocess.Popen:
    """Start a server process whose stdout and stderr go to a file (`output_of` reads it). Not a pipe: nobody reads
    a pipe during a measurement, and once 64 kB of log fill it every process of the server that writes blocks.
    The file is unlinked at once and read through a handle kept here: it goes when the server and this process
    have both closed it, so no run leaves logs behind in the temporary folder."""
    fd, path = tempfile.mkstemp(prefix="senti-server-", suffix=".log")
    try:
        with open(fd, "wb") as sink:
            proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        _OUTPUTS[proc.pid] = open(path, "rb")  # noqa: SIM115 (kept open: the only way back to an unlinked file)
    finally:
        Path(path).unlink()
    return proc


_OUTPUTS: dict[int, BinaryIO] = {}  # pid -> a read handle on the (unlinked) file a launched server writes to


def output_of(proc: subprocess.Popen, last: int | None = 2000) -> str:
    """The last `last` characters a launched server has written (None: all of it)."""
    handle = _OUTPUTS.get(proc.pid)
    if handle is None:
        return ""
    handle.seek(0)
    text = handle.read().decode("utf-8", errors="replace")
    return text[-last:] if last else text


def wait_ready(proc: subprocess.Popen, url: str, timeout_s: float = 120.0) -> None:
    """Return once `url` answers 200; RuntimeError (with the server's last output) if it exits or times out."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            raise RuntimeError(f"the server at {url} did not start: {output_of(proc)}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)


def start_senti(args: list[str], ready: str = "/readyz", env: dict | None = None,
                timeout_s: float = 120.0) -> tuple[subprocess.Popen, str]:
    """(process, base URL) of `senti ARGS --port P` on 127.0.0.1, once `ready` answers 200."""
    port = free_port()
    proc = launch([sys.executable, "-m", "senti.cli", *args, "--port", str(port)], env=env)
    base = f"http://127.0.0.1:{port}"
    wait_ready(proc, base + ready, timeout_s)
    return proc, base
