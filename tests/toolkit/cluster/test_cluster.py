"""Training across nodes: two `senti` commands on 127.0.0.1, each its own node of Paddle's launcher, one CPU
worker each, as two machines would run them (sharing one output folder, as on a network file system)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from senti.core import layout
from tests.helpers import TCPSTORE, synthetic_rows, write_folder

pytestmark = pytest.mark.listens_beyond_loopback(TCPSTORE)  # every run here launches data-parallel workers

SENTI = [sys.executable, "-m", "senti.cli"]
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_nodes(args: list[str], port: int, per_node=None, nodes=(0, 1)) -> dict[int, subprocess.Popen]:
    """One `senti` command a node; `per_node[rank]` adds options to that node's command only."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return {rank: subprocess.Popen(
        SENTI + args + ["--nnodes", "2", "--node-rank", str(rank), "--master", f"127.0.0.1:{port}", "--threads", "1"]
        + ([] if args[0] == "pretrain" else ["--device", "cpu"]) + (per_node or {}).get(rank, []),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in nodes}


def _finish(procs: dict[int, subprocess.Popen], timeout: float) -> dict[int, tuple[int, str, str]]:
    results = {}
    for rank, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            out, err = proc.communicate()
            pytest.fail(f"node {rank} did not end within {timeout} s:\n{out}\n{err}")
        results[rank] = (proc.returncode, out, err)
    return results


def _kill_tree(pid: int) -> None:
    """SIGKILL a node's every process: senti, the launcher and its workers (which run in their own sessions)."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    for proc in [root, *root.children(recursive=True)]:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def _digest_of(folder: Path) -> str:
    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.training.collective import weights_digest

    model, _, _ = load_checkpoint(folder)
    return weights_digest(model)


@pytest.fixture
def reviews(tmp_path) -> Path:
    return write_folder(tmp_path / "reviews", synthetic_rows(600, seed=1), synthetic_rows(120, seed=2),
                        synthetic_rows(120, seed=3))


def test_two_nodes_train_as_one(reviews, tmp_path):
    out = tmp_path / "model"
    results = _finish(_start_nodes(["train", "--dataset", str(reviews), "--output-dir", str(out), "--epochs", "1",
                                    "--batch-size", "16", "--lr", "1e-3", "--no-baseline"], free_port()), 300)
    for rank, (code, stdout, stderr) in results.items():
        assert code == 0, f"node {rank}:\n{stdout}\n{stderr}"
    assert "node 1 done" in results[1][1]
    metrics = json.loads((out / layout.METRICS).read_text(encoding="utf-8"))
    assert (metrics["world_size"], metrics["nodes"]) == (2, 2)
    workers = metrics["workers"]
    assert [(w["rank"], w["node"]) for w in workers] == [(0, 0), (1, 1)]
    assert [w["steps"] for w in workers] == [600 // 16 // 2] * 2  # each node took half of the batches
    # The replicas ended identical, and the checkpoint (saved at the one evaluation, the end) is those weights.
    assert workers[0]["weights_sha256"] == workers[1]["weights_sha256"] == _digest_of(out)
    meta = json.loads((out / layout.CHECKPOINT_META).read_text(encoding="utf-8"))
    assert meta["parallel"] == {"world_size": 2, "nodes": 2}
    # Each node kept its own launcher logs; only node 0 wrote the model.
    assert (out / "launch_logs" / "node-0" / "workerlog.0").is_file()
    assert (out / "launch_logs" / "node-1" / "workerlog.0").is_file()


def test_a_node_that_dies_ends_the_run_on_every_node(tmp_path):
    data = write_folder(tmp_path / "d", synthetic_rows(4000, seed=1), synthetic_rows(64, seed=2))
    out = tmp_path / "model"
    procs = _start_nodes(["train", "--dataset", str(data), "--output-dir", str(out), "--epochs", "5",
                          "--batch-size", "16", "--lr", "1e-3", "--eval-every", "20", "--no-baseline",
                          "--ngram-buckets", "0"], free_port())
    deadline = time.monotonic() + 240
    while not (out / layout.CHECKPOINT_META).is_file():  # node 0 has saved a checkpoint
        assert time.monotonic() < deadline and procs[0].poll() is None, procs[0].communicate()
        time.sleep(0.5)
    _kill_tree(procs[1].pid)
    killed = time.monotonic()
    code, stdout, stderr = _finish({0: procs[0]}, 120)[0]
    assert time.monotonic() - killed < 90  # gloo gives up on a lost peer at once, a silent one after 30 s
    assert code != 0
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and "lost contact with its peers" in lines[-1], stderr
    assert "Traceback" not in stderr
    assert len(_digest_of(out)) == 64  # the last complete checkpoint loads


def test_nodes_with_different_settings_refuse_on_every_node(reviews, tmp_path):
    out = tmp_path / "model"
    other = write_folder(tmp_path / "other", synthetic_rows(600, seed=4), synthetic_rows(120, seed=2))
    results = _finish(_start_nodes(["train", "--dataset", str(reviews), "--output-dir", str(out), "--epochs", "1",
                                    "--no-baseline"], free_port(),
                                   per_node={0: ["--seed", "1"],
                                             1: ["--seed", "2", "--batch-size", "8", "--dataset", str(other)]}), 300)
    for rank, (code, _, stderr) in results.items():
        assert code == 2, f"node {rank}: {stderr}"
        assert "the nodes' settings differ" in stderr
        assert "batch_size: 32 on node 0, 8 on node 1" in stderr and "seed: 1 on node 0, 2 on node 1" in stderr
        assert "data_sha256: " in stderr  # the same path would not do: the rows differ
    assert not (out / layout.CHECKPOINT_META).exists()


def test_an_unreachable_master_ends_with_one_line(reviews, tmp_path):
    started = time.monotonic()
    results = _finish(_start_nodes(["train", "--dataset", str(reviews), "--output-dir", str(tmp_path / "m"),
                                    "--join-timeout", "3"], free_port(), nodes=(1,)), 120)
    code, _, stderr = results[1]
    assert code == 2 and time.monotonic() - started < 90
    assert stderr.strip().splitlines()[-1].startswith("error: node 1: the master 127.0.0.1:")
    assert "could not be reached within 3 s" in stderr


@pytest.mark.parametrize("options, message", [
    (["--nnodes", "2", "--node-rank", "2", "--master", "127.0.0.1:1"], "--node-rank 2 is out of range for --nnodes 2"),
    (["--nnodes", "2", "--node-rank", "1"], "--nnodes 2 needs --master HOST:PORT"),
    (["--nnodes", "2", "--node-rank", "0", "--master", "nohost"], "--master nohost: expected HOST:PORT"),
    (["--nnodes", "2", "--node-rank", "0", "--master", "http://127.0.0.1:29500"],
     "--master http://127.0.0.1:29500: expected HOST:PORT"),  # passed the check, then failed in the worker
    (["--master", "127.0.0.1:29500"], "--master go with --nnodes N"),  # silently ignored
    (["--node-rank", "1"], "--node-rank go with --nnodes N"),
])
def test_bad_cluster_options_are_one_line(options, message, reviews, tmp_path):
    result = subprocess.run(SENTI + ["train", "--dataset", str(reviews), "--output-dir", str(tmp_path / "m")] + options,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {message}" or message in result.stderr.strip().splitlines()[-1]


def test_the_launchers_environment_stands_in_for_the_options(monkeypatch):
    from senti.toolkit.cluster.launch import Cluster

    monkeypatch.setenv("PADDLE_NNODES", "3")
    monkeypatch.setenv("PADDLE_RANK", "2")
    monkeypatch.setenv("PADDLE_MASTER", "10.0.0.5:29500")
    assert Cluster.from_options(None, None, None) == Cluster(3, 2, "10.0.0.5:29500")
    assert Cluster.from_options(None, 0, None).node_rank == 0  # an option wins over the environment


def test_two_nodes_pretrain_and_distill(tiny_checkpoint, tmp_path):
    ckpt, data = tiny_checkpoint
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for _, text in synthetic_rows(400, seed=5)) + "\n", encoding="utf-8")
    pre = tmp_path / "pre"
    runs = {
        pre: ["pretrain", "--corpus", str(corpus), "--output-dir", str(pre), "--model", "scratch:tiny",
              "--max-steps", "6", "--batch-size", "16", "--masking", "char"],
        tmp_path / "student": ["distill", "--teacher", str(ckpt), "--dataset", str(data), "--output-dir",
                               str(tmp_path / "student"), "--student", "2l-128h", "--epochs", "1",
                               "--batch-size", "16"],
    }
    for out, args in runs.items():
        results = _finish(_start_nodes(args, free_port()), 300)
        for rank, (code, stdout, stderr) in results.items():
            assert code == 0, f"{args[0]} node {rank}:\n{stdout}\n{stderr}"
        metrics = json.loads((out / layout.METRICS).read_text(encoding="utf-8"))
        workers = metrics["workers"]
        assert metrics["world_size"] == 2 and [w["node"] for w in workers] == [0, 1]
        assert workers[0]["weights_sha256"] == workers[1]["weights_sha256"]
        assert json.loads((out / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["parallel"]["nodes"] == 2


def _listening(pid_tree: list[psutil.Process], port: int) -> list[str]:
    """The addresses processes of the tree listen on at `port`."""
    found = []
    for proc in pid_tree:
        try:
            found += [c.laddr.ip for c in proc.net_connections(kind="tcp")
                      if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
        except psutil.NoSuchProcess:
            pass
    return found


def test_the_rendezvous_listens_only_on_the_host_given(reviews, tmp_path):
    # --master 127.0.0.1:PORT opened 0.0.0.0:PORT, unauthenticated, for the whole run.
    port = free_port()
    procs = _start_nodes(["train", "--dataset", str(reviews), "--output-dir", str(tmp_path / "m"), "--join-timeout",
                          "60"], port, nodes=(0,))
    try:
        deadline, addresses = time.monotonic() + 60, list[str]()
        while not addresses and time.monotonic() < deadline:
            root = psutil.Process(procs[0].pid)
            addresses = _listening([root, *root.children(recursive=True)], port)
            time.sleep(0.3)
        assert addresses == ["127.0.0.1"], addresses
    finally:
        _kill_tree(procs[0].pid)
        procs[0].communicate()


def test_a_master_port_another_program_holds_is_said(reviews, tmp_path):
    # It said "not all 2 nodes joined" after the join timeout.
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        started = time.monotonic()
        code, _, stderr = _finish(_start_nodes(["train", "--dataset", str(reviews), "--output-dir",
                                                str(tmp_path / "m")], port, nodes=(0,)), 120)[0]
    assert code == 2 and time.monotonic() - started < 60
    assert stderr.strip().splitlines()[-1].startswith(f"error: --master 127.0.0.1:{port}: node 0 cannot listen there")


def _command(process) -> str:
    """A process's command line; "" for one that ended while the tree was read (a short-lived child can be a
    zombie by then: reading its command line raised ZombieProcess in a full run on a loaded machine)."""
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
        return ""


def test_a_killed_run_leaves_no_worker_behind(tmp_path):
    # kill -9 of senti left Paddle's launcher and its workers training, in sessions of their own, for as long as
    # the run would have lasted.
    data = write_folder(tmp_path / "d", synthetic_rows(4000, seed=1), synthetic_rows(64, seed=2))
    proc = subprocess.Popen(SENTI + ["train", "--dataset", str(data), "--output-dir", str(tmp_path / "m"),
                                     "--epochs", "20", "--devices", "0,1", "--device", "cpu", "--threads", "1",
                                     "--no-baseline", "--ngram-buckets", "0"],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, tree = time.monotonic() + 120, []
    while time.monotonic() < deadline:  # senti, the launcher and both workers
        tree = [p for p in psutil.Process(proc.pid).children(recursive=True)
                if "cluster/worker.py" in _command(p) and "senti.toolkit.cluster.launcher" not in _command(p)]
        if len(tree) == 2:
            break
        time.sleep(0.5)
    assert len(tree) == 2, "the workers did not start"
    everything = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGKILL)  # senti's process group, as a terminal's kill would
    proc.wait()
    gone, alive = psutil.wait_procs(everything, timeout=30)
    assert not alive, [_command(p)[:120] for p in alive]


def test_a_data_parallel_run_passes_on_its_first_workers_progress(tmp_path):
    # The command printed nothing for minutes while its workers trained (their lines went to their logs only).
    from senti.toolkit.cluster.launch import Cluster, _watch

    log = tmp_path / "workerlog.0"
    writer = ("import time, sys\n"
              f"log = open({str(log)!r}, 'a')\n"
              "for n in range(4):\n"
              "    log.write(f'epoch 1 step {n}: loss 0.5\\n'); log.flush(); time.sleep(0.6)\n")
    said: list[str] = []
    assert _watch([sys.executable, "-c", writer], tmp_path, Cluster(), say=said.append, every_s=0.3) == 0
    assert said and all(line.startswith("worker 0: epoch 1 step ") for line in said)
    assert len(said) == len(set(said)) >= 2  # each new line once, as it came


def test_the_launcher_does_not_print_paddles_thread_advice():
    """Paddle's import prints "PLEASE USE OMP_NUM_THREADS WISELY." whenever OMP_NUM_THREADS > 1; senti sets the
    threads on purpose, and the launcher's import of Paddle printed it into every multi-node log (before)."""
    done = subprocess.run([sys.executable, "-m", "senti.toolkit.cluster.launcher", "--help"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-2000:]
    assert "WISELY" not in done.stderr and "OMP_NUM_THREADS set to" not in done.stderr
