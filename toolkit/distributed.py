"""Data-parallel training through `paddle.distributed.launch`, which starts one worker per device.

The launcher runs this file as a script, which puts this folder first on the workers' sys.path: no module
in `toolkit/` may be named like a standard-library one (a `select.py` here broke `import subprocess`)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from senti.core.errors import SentiError
from senti.toolkit.config import TrainConfig


def launch_command(config_file: Path, devices: list[str], device: str, log_dir: Path) -> list[str]:
    cmd = [sys.executable, "-m", "paddle.distributed.launch", "--log_dir", str(log_dir)]
    if device == "cpu":
        # CPU workers talk through gloo; the launcher counts processes instead of device ids.
        cmd += ["--nproc_per_node", str(len(devices)), "--backend", "gloo"]
    else:
        cmd += ["--devices", ",".join(devices)]
    return cmd + [str(Path(__file__).resolve()), str(config_file)]


def launch_training(config, devices: list[str]) -> Path:
    """Run `config` (a TrainConfig or PretrainConfig) on `devices` (ids, or one entry per CPU process); return the
    workers' log folder."""
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    log_dir = out / "launch_logs"
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=out, delete=False) as fh:
        json.dump({"kind": config.KIND, "settings": config.to_json()}, fh)
    config_file = Path(fh.name)
    try:
        # The launcher runs this file as a script; it imports the installed `senti` package.
        result = subprocess.run(launch_command(config_file, devices, config.device, log_dir))
    finally:
        config_file.unlink(missing_ok=True)
    if result.returncode != 0:
        raise SentiError(f"data-parallel {config.KIND} failed (exit {result.returncode}); worker logs in {log_dir}")
    return log_dir


def _worker(config_file: str) -> None:
    data = json.loads(Path(config_file).read_text(encoding="utf-8"))
    if data["kind"] == "pretraining":
        from senti.toolkit.pretrain import PretrainConfig, run_pretraining

        run_pretraining(PretrainConfig.from_json(data["settings"]))
    else:
        from senti.toolkit.train import run_training

        run_training(TrainConfig.from_json(data["settings"]))


if __name__ == "__main__":
    _worker(sys.argv[1])
