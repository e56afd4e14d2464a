"""The supervisor of `senti serve --workers N`: uvicorn's, plus what a single process would say in /readyz.

uvicorn's supervisor replaces workers on SIGHUP (a replacement that does not start is dropped and the old worker
kept) and restarts a dead worker at once. Two things are added here:
- what happened is written to a status folder every worker reads for /readyz: the last reload (and why it failed,
  as the failing worker wrote it), how many workers are in service (one worker answering /readyz says nothing of
  the others: at start-up the rest may still be loading) and workers that keep failing;
- a worker that dies again and again is restarted with exponential backoff (1 s doubling to 30 s) instead of
  every half second, and one that cannot start after the server came up no longer stops the healthy ones.
- each worker listens on a socket of its own, all bound to the port with SO_REUSEPORT, so that the kernel spreads
  the connections over the workers. On uvicorn's one shared socket the first worker to wake accepts every pending
  connection (asyncio accepts up to the backlog per wake-up): 32 keep-alive clients connecting at once all landed
  on one worker while the other idled (docs/results/serving.md). A worker's socket starts
  listening only once its model is loaded, and the supervisor keeps no copy of it, so a dead worker's socket
  closes with it and no connection waits on it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from senti.core.artifacts import write_json_atomic
from senti.serving.model_slot import ReloadRecord, timestamp

STATUS_ENV = "SENTI_SERVE_STATUS"  # the status folder (private, made by the supervisor) workers read and write
FAILURE_FILE = "worker-failure.json"  # written by a worker whose model did not load: its pid and the reason
RELOAD_FILE = "reload.json"  # the last SIGHUP reload, as /readyz shows it
WORKERS_FILE = "workers.json"  # workers in service of how many; those that keep failing: count, next attempt, reason
BACKOFF_START_S, BACKOFF_MAX_S = 1.0, 30.0
# How long a rolling reload waits for a replacement worker that is alive and loading its model. uvicorn waits its
# health-check timeout (5 s): a Paddle worker loading beside six busy clients on two cores needed longer, and every
# reload under traffic was aborted ("not ready in time") though the export was whole.
WORKER_START_S = 180.0

logger = logging.getLogger("uvicorn.error")


def record_worker_failure(error: BaseException) -> None:
    """Called by a worker whose model did not load, before it exits: the reason the supervisor will report, and
    one line in the log (a worker retried with backoff would otherwise print a traceback every attempt)."""
    reason = str(error).splitlines()[0] if str(error) else repr(error)
    logger.error(f"worker [{os.getpid()}] could not load the model: {reason}")
    folder = os.environ.get(STATUS_ENV)
    if folder:
        write_json_atomic(Path(folder) / FAILURE_FILE, {"pid": os.getpid(), "error": reason, "at": time.time()})


def read_status(folder: str | None = None) -> dict:
    """{"reload": ..., "workers": ...} as the supervisor last wrote them (absent keys: nothing happened)."""
    folder = folder or os.environ.get(STATUS_ENV)
    status = {}
    for key, name in (("reload", RELOAD_FILE), ("workers", WORKERS_FILE)):
        try:
            status[key] = json.loads((Path(folder) / name).read_text(encoding="utf-8")) if folder else None
        except (OSError, ValueError):
            status[key] = None
    return {k: v for k, v in status.items() if v is not None}


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port (not listening yet) that shares the port with the other workers' sockets."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class WorkerProcess(Process):
    """A uvicorn worker process with a listening socket of its own (see the module's docstring)."""

    def __init__(self, config, address: tuple[str, int]):
        self.listener = reuse_port_socket(*address)
        super().__init__(config, [self.listener])

    def start(self) -> None:
        try:
            super().start()  # the socket is handed to the child here (multiprocessing duplicates it)
        finally:
            self.listener.close()  # so that it closes when the worker ends


class Supervisor(Multiprocess):
    """uvicorn's Multiprocess with a status folder, restart backoff and a socket per worker (see the module's
    docstring). `port_holder`: a reuse_port_socket bound to the port, kept by the caller (never listening) while
    the server runs, so the port stays this server's between workers and a port of 0 is resolved once for all."""

    def __init__(self, config, port_holder: socket.socket, status_dir: Path):
        super().__init__(config, [])
        self.address = port_holder.getsockname()[:2]
        self.status_dir = Path(status_dir)
        self.failures = 0  # consecutive worker deaths without a worker becoming ready between them
        self.waiting: dict[int, float] = {}  # slot -> monotonic time of its next start attempt
        self.fresh: set[int] = set()  # slots whose process has not been seen ready yet
        self.served = False  # a worker has been ready: from then on a failing worker never stops the others

    def new_process(self) -> WorkerProcess:
        return WorkerProcess(self.config, self.address)

    def init_processes(self) -> None:
        for _ in range(self.processes_num):
            process = self.new_process()
            process.start()
            self.processes.append(process)
        self.fresh = set(range(len(self.processes)))

    def _failure_reason(self, pid: int | None = None, since: float | None = None) -> str | None:
        """The reason a worker wrote before it exited: that of `pid`, or any written after `since`."""
        try:
            data = json.loads((self.status_dir / FAILURE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        mine = data.get("pid") == pid if since is None else data.get("at", 0) >= since
        return data.get("error") if mine else None

    def _replace_each(self) -> None:
        """uvicorn's rolling restart (Multiprocess.restart_all), each replacement with a socket of its own."""
        for idx, old in enumerate(self.processes):
            if self.should_exit.is_set():
                return
            new = self.new_process()
            new.start()
            if not new.wait_until_ready(WORKER_START_S, self.should_exit):
                new.kill()
                new.join()
                if not self.should_exit.is_set():
                    logger.error(f"New child process [{new.pid}] was not ready in time; keeping worker "
                                 f"[{old.pid}] and aborting the restart.")
                return
            old.terminate()
            old.join()
            self.processes[idx] = new

    def restart_all(self) -> None:
        """uvicorn's rolling restart (a replacement that is not ready is dropped, the old worker kept and the
        restart stopped), its outcome written for /readyz."""
        started, before = time.time(), list(self.processes)
        self._replace_each()
        if self.should_exit.is_set():
            return
        replaced = [i for i, (old, now) in enumerate(zip(before, self.processes)) if old is not now]
        for idx in replaced:  # a replaced slot is no longer waiting for a restart, nor unproven
            self.waiting.pop(idx, None)
            self.fresh.discard(idx)
        if replaced:  # new workers in service: whatever kept failing before is over
            self.failures = 0
            self._write_workers()
        ok = len(replaced) == len(self.processes)
        error = None if ok else self._failure_reason(since=started) or "the new worker was not ready in time"
        record = ReloadRecord("SIGHUP", ok, round(time.time() - started, 2), error=error,
                              workers_replaced=len(replaced))
        if error:
            logger.error(f"reload failed, the workers keep the model they had: {record.error}")
        write_json_atomic(self.status_dir / RELOAD_FILE, record.to_json())

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        now = time.monotonic()
        for idx, process in enumerate(self.processes):
            if idx in self.waiting:
                if now < self.waiting[idx]:
                    continue
                del self.waiting[idx]
                self.processes[idx] = self.new_process()
                self.processes[idx].start()
                self.fresh.add(idx)
                continue
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                if idx in self.fresh and process.is_ready(timeout=1):
                    self.fresh.discard(idx)
                    self.served = True
                    self.failures = 0
                    self._write_workers()
                continue
            process.kill()
            process.join()
            if self.should_exit.is_set():
                return
            if process.exitcode == STARTUP_FAILURE and not self.served:  # as uvicorn: a server that never came up
                logger.error(f"Child process [{process.pid}] failed to start, stopping the parent process.")
                self.should_exit.set()
                return
            self.failures += 1
            delay = min(BACKOFF_MAX_S, BACKOFF_START_S * 2 ** (self.failures - 1))
            reason = self._failure_reason(process.pid) or f"exit code {process.exitcode}"
            logger.error(f"worker [{process.pid}] died ({reason}); starting another in {delay:.0f} s "
                         f"(failure {self.failures} in a row)")
            self.waiting[idx] = now + delay
            self._write_workers(failures_in_a_row=self.failures, last_error=reason, next_attempt_in_s=delay)

    def _write_workers(self, **failing) -> None:
        """workers.json: the workers in service (started, ready, not waiting for a restart) of how many, and
        `failing` with the details of the last death while workers keep dying."""
        in_service = sum(i not in self.fresh and i not in self.waiting for i in range(len(self.processes)))
        write_json_atomic(self.status_dir / WORKERS_FILE, {"in_service": in_service, "of": len(self.processes),
                                                           "failing": bool(failing), **failing, "at": timestamp()})
