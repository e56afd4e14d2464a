"""Starting a data-parallel run on this node through `paddle.distributed.launch`, one node or several.

Every node runs the same senti command; Paddle's launcher on each joins the others at `--master` (node 0 serves
it) and starts this node's workers. The launcher waits for missing nodes forever, so senti bounds that wait
(`join_timeout`), and it turns what a failed worker left (its one-line error, or gloo's lost-peer error) into
one line for the user. Workers: `senti.toolkit.cluster.worker`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from senti.core import layout
from senti.core.errors import SentiError
from senti.toolkit.cluster.launcher import MASTER_HOST, PARENT_PID
from senti.toolkit.cluster.worker import ERROR_FILE, PEER_LOST, peer_lost

JOIN_TIMEOUT_S = 300.0  # nodes started by hand on several machines may be minutes apart


@dataclass(frozen=True)
class Cluster:
    """Where this node stands: how many nodes, which one this is, and the rendezvous address of node 0."""

    nnodes: int = 1
    node_rank: int = 0
    master: str | None = None
    join_timeout: float = JOIN_TIMEOUT_S

    @classmethod
    def from_options(cls, nnodes: int | None, node_rank: int | None, master: str | None,
                     join_timeout: float | None = None) -> Cluster:
        """The options, else the launcher's own environment (PADDLE_NNODES, PADDLE_RANK, PADDLE_MASTER, as a
        cluster scheduler sets them), else one node; a one-line error for what cannot work."""
        # a launched worker's own launcher variables are not for us
        env: Mapping[str, str] = {} if "PADDLE_TRAINER_ID" in os.environ else os.environ
        if nnodes is None and "PADDLE_NNODES" not in env and (master is not None or node_rank is not None):
            given = " and ".join(o for o, v in (("--master", master), ("--node-rank", node_rank)) if v is not None)
            raise SentiError(f"{given} go with --nnodes N (the number of machines in the run); without it the run "
                             "is one machine and they would be ignored")
        nnodes = nnodes if nnodes is not None else _env_int(env, "PADDLE_NNODES", 1)
        node_rank = node_rank if node_rank is not None else _env_int(env, "PADDLE_RANK", 0)
        master = master or env.get("PADDLE_MASTER") or None
        if nnodes < 1:
            raise SentiError(f"--nnodes {nnodes}: at least 1")
        if not 0 <= node_rank < nnodes:
            raise SentiError(f"--node-rank {node_rank} is out of range for --nnodes {nnodes} (0 to {nnodes - 1})")
        if nnodes > 1:
            if not master:
                raise SentiError(f"--nnodes {nnodes} needs --master HOST:PORT (node 0's address, the same on every "
                                 "node)")
            host, _, port = master.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c in host for c in "/@?# "):
                raise SentiError(f"--master {master}: expected HOST:PORT, e.g. 10.0.0.5:29500 (no scheme, no path)")
        return cls(nnodes, node_rank, master, JOIN_TIMEOUT_S if join_timeout is None else join_timeout)

    @property
    def several(self) -> bool:
        return self.nnodes > 1

    @property
    def host(self) -> str:
        return (self.master or "").rpartition(":")[0]

    @property
    def port(self) -> int:
        return int((self.master or "0").rpartition(":")[2])

    @property
    def on_loopback(self) -> bool:
        import ipaddress

        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return self.host == "localhost"


def _env_int(env, name: str, default: int) -> int:
    value = env.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise SentiError(f"{name}={value}: expected a whole number") from None


def launch_command(config_file: Path, devices: list[str], device: str, log_dir: Path,
                   cluster: Cluster = Cluster()) -> list[str]:
    """The launcher's command line for this node (gloo between CPU processes is the launcher's own choice)."""
    cmd = [sys.executable, "-m", "senti.toolkit.cluster.launcher", "--log_dir", str(log_dir)]  # Paddle's, bound and tied
    if cluster.several:
        cmd += ["--nnodes", str(cluster.nnodes), "--rank", str(cluster.node_rank), "--master", str(cluster.master)]
    if device == "cpu":  # the launcher counts CPU processes instead of device ids
        cmd += ["--nproc_per_node", str(max(1, len(devices)))]
    elif devices:
        cmd += ["--devices", ",".join(devices)]
    worker = Path(__file__).with_name("worker.py").resolve()
    return cmd + [str(worker), str(config_file)]


WORKER_LINE_EVERY_S = 30.0  # how often a data-parallel run passes on its first worker's newest log line


def launch_training(config, devices: list[str], cluster: Cluster = Cluster(), say=None) -> Path:
    """Run `config` (a TrainConfig, DistillConfig or PretrainConfig) on this node's `devices` (ids, or one entry
    per CPU process) as part of `cluster`; return this node's log folder. Raises a one-line SentiError when the
    nodes do not all join within the timeout or a worker fails."""
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Nodes sharing one output folder (a network file system) keep their logs apart.
    log_dir = out / layout.LAUNCH_LOGS / (f"node-{cluster.node_rank}" if cluster.several else "")
    log_dir.mkdir(parents=True, exist_ok=True)
    for stale in log_dir.glob(ERROR_FILE.format(rank="*")):
        stale.unlink()
    # hidden: a new run refuses a folder of files that are not a run's (toolkit.checkpoint.refuse_existing)
    with tempfile.NamedTemporaryFile("w", prefix=".launch-", suffix=".json", dir=out, delete=False) as fh:
        json.dump({"kind": config.KIND, "settings": config.to_json()}, fh)
    config_file = Path(fh.name)
    env = {**os.environ, PARENT_PID: str(os.getpid())}
    if cluster.several:
        env[MASTER_HOST] = cluster.host
        if cluster.node_rank == 0:
            refuse_taken_port(cluster)
    try:
        code = _watch(launch_command(config_file, devices, config.device, log_dir, cluster), log_dir, cluster, env,
                      say)
    finally:
        config_file.unlink(missing_ok=True)
    if code != 0:
        raise SentiError(_failure(config, log_dir, code, cluster))
    return log_dir


def refuse_taken_port(cluster: Cluster) -> None:
    """Node 0 hosts the rendezvous: a port another program holds would leave every node waiting to join."""
    with socket.socket(socket.AF_INET6 if ":" in cluster.host else socket.AF_INET) as probe:
        try:
            probe.bind((cluster.host.strip("[]"), cluster.port))
        except OSError as err:
            raise SentiError(f"--master {cluster.master}: node 0 cannot listen there ({err.strerror}); another "
                             "program holds the port, or the host is not this machine's") from None


def _watch(cmd: list[str], log_dir: Path, cluster: Cluster, env: dict | None = None, say=None,
           every_s: float = WORKER_LINE_EVERY_S) -> int:
    """Run the launcher; stop it when the nodes have not all joined within the timeout, or when a worker has
    reported its error and the launcher lingers (it may wait on a master that is gone). With `say`, the newest line
    of this node's first worker's log is passed on every `every_s` seconds when it changed (the run printed nothing
    for minutes)."""
    with open(log_dir / "launcher.log", "ab") as launcher_log:
        proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=launcher_log, env=env)
    started, failed_at = time.monotonic(), None
    said_at, last_line = started, ""
    try:
        while proc.poll() is None:
            time.sleep(min(0.5, every_s))
            if say is not None and time.monotonic() - said_at >= every_s:
                said_at, line = time.monotonic(), _last_line(log_dir / "workerlog.0")
                if line and line != last_line:
                    say(f"worker 0: {line}")
                    last_line = line
            joined = any(log_dir.glob("workerlog.*"))  # the launcher starts workers once every node is there
            if not joined and time.monotonic() - started > cluster.join_timeout:
                _stop(proc)
                raise SentiError(_join_failure(cluster))
            if failed_at is None and any(log_dir.glob(ERROR_FILE.format(rank="*"))):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > 30:
                _stop(proc)
        return proc.returncode
    except BaseException:
        _stop(proc)
        raise


def _last_line(log: Path) -> str:
    """The last non-blank line of a worker's log (its end only is read), or ""."""
    try:
        tail = _log_tail(log, 4096)
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _log_tail(log: Path, size: int) -> str:
    """The last `size` bytes of a log, as text."""
    with open(log, "rb") as fh:
        fh.seek(max(0, log.stat().st_size - size))
        return fh.read().decode("utf-8", "replace")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the launcher (it stops its workers), then SIGKILL its group if it does not go."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _join_failure(cluster: Cluster) -> str:
    wait = f"within {cluster.join_timeout:g} s"
    if cluster.node_rank != 0 and cluster.master and not _reachable(cluster.master):
        return (f"node {cluster.node_rank}: the master {cluster.master} could not be reached {wait}; start node 0 "
                "with the same --master, and check the address and firewall")
    return (f"node {cluster.node_rank}: not all {cluster.nnodes} nodes joined at {cluster.master} {wait}; start the "
            "same command on every node with its own --node-rank")


def _reachable(master: str) -> bool:
    host, _, port = master.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return True
    except OSError:
        return False


def _failure(config, log_dir: Path, code: int, cluster: Cluster) -> str:
    """The first worker's own error line, else gloo's lost-peer error from the end of a worker's log, else a
    pointer to the logs."""
    for path in sorted(log_dir.glob(ERROR_FILE.format(rank="*"))):
        message = path.read_text(encoding="utf-8").strip()
        if message:
            return message
    for path in sorted(log_dir.glob("workerlog.*")):
        tail = _log_tail(path, 8192)
        if "gloo" in tail and any(mark in tail for mark in PEER_LOST):
            return f"node {cluster.node_rank}, worker {path.name.split('.')[-1]}: {peer_lost(config.output_dir)}"
    return f"data-parallel {config.KIND} failed (exit {code}); worker logs in {log_dir}"
