"""The worker side of data-parallel training (`senti.toolkit.cluster` starts the launcher): the script each
worker runs, and what the runs ask of their peers: joining, agreeing on settings, the census of who did what.

The launcher runs this file as a script, which puts this folder first on the workers' sys.path: no module
in its folder may be named like a standard-library one (a `select.py` here broke `import subprocess`).

Gloo, the CPU collective library, gives up on a silent peer after a fixed 30 s: work one rank does alone
(the baseline, tokenizing a corpus) happens before `join`, whose rendezvous waits far longer.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from senti.core.errors import SentiError

ERROR_FILE = "senti-error.rank{rank}.txt"  # a worker's one-line error beside its log, for the launching command
PEER_LOST = ("gloo", "Connection closed by peer", "Connection reset by peer", "TIMEOUT")


class SettingsDiffer(SentiError):
    """Nodes started with different settings or data."""


def node_of(rank: int) -> int:
    """The node a global rank runs on (the launcher numbers ranks node by node)."""
    per_node = int(os.environ.get("PADDLE_LOCAL_SIZE", "1") or 1)
    return rank // per_node


def nodes() -> int:
    return int(os.environ.get("PADDLE_NNODES", "1") or 1)


def join(settings: dict) -> None:
    """Start the collective group, then refuse on every worker when the workers' `settings` differ."""
    import paddle.distributed as dist

    if not dist.is_initialized():  # a worker that waited for its node's tokenizer has joined already
        dist.init_parallel_env()
    mine = {**settings, "_rank": dist.get_rank()}
    everyone: list = []
    dist.all_gather_object(everyone, mine)
    differences = []
    for key in settings:
        values = [json.dumps(s.get(key), sort_keys=True, default=str) for s in everyone]
        if len(set(values)) > 1:
            seen = ", ".join(f"{v} on node {node_of(s['_rank'])}" for v, s in zip(values, everyone)
                             if s["_rank"] in _firsts(everyone))
            differences.append(f"{key}: {seen}")
    if differences:
        raise SettingsDiffer("the nodes' settings differ, so none trains: " + "; ".join(differences) +
                             " (run the same command, on the same data, on every node)")


def _firsts(everyone: list) -> set[int]:
    """One rank per node (the first), so a difference is named once per node."""
    firsts: dict[int, int] = {}
    for s in everyone:
        firsts.setdefault(node_of(s["_rank"]), s["_rank"])
    return set(firsts.values())


def census(model, steps: int, world: int) -> list[dict] | None:
    """Every worker's rank, node, steps taken and weights digest, gathered (None on one worker): rank 0 records
    it, so a run shows that each node did its share and that the replicas ended identical."""
    if world == 1:
        return None
    import paddle.distributed as dist

    mine = {"rank": dist.get_rank(), "node": node_of(dist.get_rank()), "steps": steps,
            "weights_sha256": weights_digest(model)}
    everyone: list = []
    dist.all_gather_object(everyone, mine)
    return sorted(everyone, key=lambda r: r["rank"])


def weights_digest(model) -> str:
    """SHA-256 over the parameters by name (a DataParallel wrapper's inner model): equal digests, equal weights."""
    inner = getattr(model, "_layers", model)
    digest = hashlib.sha256()
    for name, value in sorted(inner.state_dict().items()):
        digest.update(name.encode())
        digest.update(value.numpy().tobytes())
    return digest.hexdigest()


def _report_error(message: str) -> None:
    """The worker's one line, beside its log, for the launching command to print."""
    log_dir = os.environ.get("PADDLE_LOG_DIR")
    if log_dir:
        rank = os.environ.get("PADDLE_TRAINER_ID", "0")
        (Path(log_dir) / ERROR_FILE.format(rank=rank)).write_text(message + "\n", encoding="utf-8")
    print(f"error: {message}", file=sys.stderr, flush=True)


def _worker(config_file: str) -> None:
    import signal

    from senti.core.runtime import die_with_parent

    # The launcher started this worker; should it die (senti killed outright ends it), so does the worker. SIGKILL:
    # a worker waiting in a collective would not reach its next step boundary, and every save is an atomic rename.
    die_with_parent(signal.SIGKILL)
    data = json.loads(Path(config_file).read_text(encoding="utf-8"))
    settings = data["settings"]
    try:
        if data["kind"] == "pretraining":
            from senti.toolkit.pretrain import PretrainConfig, run_pretraining

            run_pretraining(PretrainConfig.from_json(settings))
        elif data["kind"] == "distillation":
            from senti.toolkit.config import DistillConfig
            from senti.toolkit.distill import run_distillation

            run_distillation(DistillConfig.from_json(settings))
        else:
            from senti.toolkit.config import TrainConfig
            from senti.toolkit.train import run_training

            run_training(TrainConfig.from_json(settings))
    except SentiError as err:
        _report_error(str(err))
        raise SystemExit(getattr(err, "exit_code", 2)) from None
    except RuntimeError as err:
        if not any(mark in str(err) for mark in PEER_LOST):
            raise
        _report_error(f"rank {os.environ.get('PADDLE_TRAINER_ID', '?')}: {peer_lost(settings['output_dir'])}")
        raise SystemExit(3) from None


def peer_lost(output_dir: str) -> str:
    """The line for a worker whose peers went away. Gloo often aborts the process from a background thread
    instead of raising, so the launching command also says it when it finds gloo's error in a worker's log."""
    return ("lost contact with its peers (a node died, hung for 30 s or left the network), so the run stopped on "
            f"every node; the last complete checkpoint in {output_dir} on node 0 stays loadable")


if __name__ == "__main__":
    _worker(sys.argv[1])
