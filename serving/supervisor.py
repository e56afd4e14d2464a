"""The supervisor of `senti serve --workers N`: uvicorn's, plus what a single process would say in /readyz.

uvicorn's supervisor replaces workers on SIGHUP (a replacement that does not start is dropped and the old worker
kept) and restarts a dead worker at once. Two things are added here:
- what happened is written to a status folder every worker reads for /readyz: the last reload (and why it failed,
  as the failing worker wrote it), how many workers are in service (one worker answering /readyz says nothing of
  the others: at start-up the rest may still be loading) and workers that keep failing;
- a worker that dies again and again is restarted with exponential backoff (1 s doubling to 30 s) instead of
  every half second, and one that cannot start after the server came up no longer stops the healthy ones.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from senti.core.artifacts import write_json_atomic

STATUS_ENV = "SENTI_SERVE_STATUS"  # the status folder (private, made by the supervisor) workers read and write
FAILURE_FILE = "worker-failure.json"  # written by a worker whose model did not load: its pid and the reason
RELOAD_FILE = "reload.json"  # the last SIGHUP reload, as /readyz shows it
WORKERS_FILE = "workers.json"  # workers in service of how many; those that keep failing: count, next attempt, reason
BACKOFF_START_S, BACKOFF_MAX_S = 1.0, 30.0

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


class Supervisor(Multiprocess):
    """uvicorn's Multiprocess with a status folder and restart backoff (see the module's docstring)."""

    def __init__(self, config, sockets, status_dir: Path):
        super().__init__(config, sockets)
        self.status_dir = Path(status_dir)
        self.failures = 0  # consecutive worker deaths without a worker becoming ready between them
        self.waiting: dict[int, float] = {}  # slot -> monotonic time of its next start attempt
        self.fresh: set[int] = set()  # slots whose process has not been seen ready yet
        self.served = False  # a worker has been ready: from then on a failing worker never stops the others

    def init_processes(self) -> None:
        super().init_processes()
        self.fresh = set(range(len(self.processes)))

    def _failure_reason(self, pid: int | None = None, since: float | None = None) -> str | None:
        """The reason a worker wrote before it exited: that of `pid`, or any written after `since`."""
        try:
            data = json.loads((self.status_dir / FAILURE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        mine = data.get("pid") == pid if since is None else data.get("at", 0) >= since
        return data.get("error") if mine else None

    def restart_all(self) -> None:
        """uvicorn's rolling restart (a replacement that is not ready is dropped, the old worker kept and the
        restart stopped), its outcome written for /readyz."""
        started, before = time.time(), list(self.processes)
        super().restart_all()
        if self.should_exit.is_set():
            return
        replaced = [i for i, (old, now) in enumerate(zip(before, self.processes)) if old is not now]
        for idx in replaced:  # a replaced slot is no longer waiting for a restart, nor unproven
            self.waiting.pop(idx, None)
            self.fresh.discard(idx)
        if replaced:  # new workers in service: whatever kept failing before is over
            self.failures = 0
            self._write_workers()
        record: dict[str, Any] = {"ok": len(replaced) == len(self.processes), "at": time.time(),
                                  "workers_replaced": len(replaced)}
        if not record["ok"]:
            record["error"] = self._failure_reason(since=started) or "the new worker was not ready in time"
            logger.error(f"reload failed, the workers keep the model they had: {record['error']}")
        write_json_atomic(self.status_dir / RELOAD_FILE, record)

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        now = time.monotonic()
        for idx, process in enumerate(self.processes):
            if idx in self.waiting:
                if now < self.waiting[idx]:
                    continue
                del self.waiting[idx]
                self.processes[idx] = Process(self.config, self.sockets)
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
                                                           "failing": bool(failing), **failing, "at": time.time()})
