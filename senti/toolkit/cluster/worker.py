"""The script each data-parallel worker runs (`senti.toolkit.cluster.launch` starts the launcher): it reads the
run's settings, runs it, and turns its failure into one line beside its log for the launching command. What the
runs ask of their peers (joining, agreeing on settings, the census) is `senti.toolkit.training.collective`.

The launcher runs this file as a script, which puts this folder first on the workers' sys.path: no module
in its folder may be named like a standard-library one (a `select.py` here broke `import subprocess`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from senti.core.errors import SentiError

ERROR_FILE = "senti-error.rank{rank}.txt"  # a worker's one-line error beside its log, for the launching command
PEER_LOST = ("gloo", "Connection closed by peer", "Connection reset by peer", "TIMEOUT")


def _report_error(message: str) -> None:
    """The worker's one line, beside its log, for the launching command to print."""
    log_dir = os.environ.get("PADDLE_LOG_DIR")
    if log_dir:
        rank = os.environ.get("PADDLE_TRAINER_ID", "0")
        (Path(log_dir) / ERROR_FILE.format(rank=rank)).write_text(message + "\n", encoding="utf-8")
    print(f"error: {message}", file=sys.stderr, flush=True)


def _worker(config_file: str) -> None:
    import signal

    from senti.core.runtime import die_with_parent, import_paddle

    import_paddle()  # before any module imports Paddle, whose import prints its OMP_NUM_THREADS advice otherwise
    # The launcher started this worker; should it die (senti killed outright ends it), so does the worker. SIGKILL:
    # a worker waiting in a collective would not reach its next step boundary, and every save is an atomic rename.
    die_with_parent(signal.SIGKILL)
    data = json.loads(Path(config_file).read_text(encoding="utf-8"))
    settings = data["settings"]
    try:
        if data["kind"] == "pretraining":
            from senti.toolkit.training.pretrain import PretrainConfig, run_pretraining

            run_pretraining(PretrainConfig.from_json(settings))
        elif data["kind"] == "distillation":
            from senti.toolkit.training.config import DistillConfig
            from senti.toolkit.training.distill import run_distillation

            run_distillation(DistillConfig.from_json(settings))
        else:
            from senti.toolkit.training.config import TrainConfig
            from senti.toolkit.training.train import run_training

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
