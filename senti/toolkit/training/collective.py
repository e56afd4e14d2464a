"""What a data-parallel run asks of its peers: joining the group, agreeing on settings and data, the census of
who did what, and stopping together.

Gloo, the CPU collective library, gives up on a silent peer after a fixed 30 s: work one rank does alone
(the baseline, tokenizing a corpus) happens before `join`, whose rendezvous waits far longer.
"""

from __future__ import annotations

import hashlib
import json
import os

from senti.core.errors import SentiError
from senti.toolkit.records import WorkerCensus


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


def census(model, steps: int, world: int) -> list[WorkerCensus] | None:
    """Every worker's rank, node, steps taken and weights digest, gathered (None on one worker): rank 0 records
    it, so a run shows that each node did its share and that the replicas ended identical."""
    if world == 1:
        return None
    import paddle.distributed as dist

    mine = {"rank": dist.get_rank(), "node": node_of(dist.get_rank()), "steps": steps,
            "weights_sha256": weights_digest(model)}
    everyone: list = []
    dist.all_gather_object(everyone, mine)
    return [WorkerCensus(**r) for r in sorted(everyone, key=lambda r: r["rank"])]


def weights_digest(model) -> str:
    """SHA-256 over the parameters by name (a DataParallel wrapper's inner model): equal digests, equal weights."""
    inner = getattr(model, "_layers", model)
    digest = hashlib.sha256()
    for name, value in sorted(inner.state_dict().items()):
        digest.update(name.encode())
        digest.update(value.numpy().tobytes())
    return digest.hexdigest()


def agree(flag: bool, world: int) -> bool:
    """True on every worker when it is true on any (a signal or the time budget reached one of them)."""
    if world == 1:
        return flag
    import paddle
    import paddle.distributed as dist

    value = paddle.to_tensor([int(flag)])
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.numpy().max())
