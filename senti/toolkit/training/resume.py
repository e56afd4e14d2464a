"""A run's resume point: optimizer moments as safetensors (loading runs no code), the step and metrics in its
metadata. Written inside the checkpoint's atomic save, so weights and optimizer state always agree."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from senti.core import layout


def _structured_names(model) -> dict[str, str]:
    """Paddle keys optimizer state by each parameter's unique name (`linear_3.w_0`), which depends on how many
    layers the process built before; the structured name (`ernie.encoder...`) does not."""
    return {p.name: n for n, p in model.named_parameters()}


def _rename(key: str, names: dict[str, str]) -> str:
    for old in sorted(names, key=len, reverse=True):  # longest first: linear_11.w_0 before linear_1.w_0
        if key.startswith(old + "_"):
            return names[old] + key[len(old):]
    return key


def save_state(optimizer, model, path: Path, state: dict) -> None:
    """The optimizer's tensors under structured names, `state` (JSON) in the file's metadata."""
    from safetensors.numpy import save_file

    names = _structured_names(model)
    tensors = {_rename(k, names): np.ascontiguousarray(v.numpy()) for k, v in optimizer.state_dict().items()
               if hasattr(v, "numpy")}
    save_file(tensors, str(path), metadata={"state": json.dumps(state)})


def read_state(out: Path) -> dict | None:
    """The saved state of an unfinished run in `out` when its weights are the ones saved with it, else None."""
    from safetensors import safe_open

    state, meta = out / layout.PRETRAIN_STATE, out / layout.CHECKPOINT_META
    if not (state.is_file() and meta.is_file()):
        return None
    with safe_open(str(state), framework="numpy") as fh:
        data = json.loads(fh.metadata()["state"])
    if json.loads(meta.read_text(encoding="utf-8")).get("steps") != data["step"]:
        return None  # the weights and the optimizer state disagree: starting over is safer than a wrong resume
    return data


def load_optimizer(optimizer, model, out: Path) -> None:
    import paddle
    from safetensors.numpy import load_file

    names = {n: p for p, n in _structured_names(model).items()}
    tensors = load_file(str(out / layout.PRETRAIN_STATE))
    optimizer.set_state_dict({_rename(k, names): paddle.to_tensor(v) for k, v in tensors.items()})
