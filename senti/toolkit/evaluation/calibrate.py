"""Calibrating a checkpoint after training: its dev split scored once, a temperature fitted on it by log-loss
(senti.core.calibration) and written into senti.json, which `senti export` carries to every runtime."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from senti.core.artifacts import Calibration
from senti.core.aspects import head_aspects
from senti.core.calibration import MIN_CALIBRATION_TEXTS, fit_calibration
from senti.core.checkpoint import CheckpointMeta, read_meta
from senti.core.errors import SentiError


def dev_scores(folder: Path, batch_size: int = 64, trust_pickle: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(logits, gold class ids) of the checkpoint at `folder` on the dev split it was trained with."""
    from senti.toolkit.data.splits import recorded_splits
    from senti.toolkit.evaluation.evaluate import Scorer

    meta = read_meta(folder)
    splits, _ = recorded_splits(Path(folder), meta.data)
    rows = [e for e in splits.dev if e.label in meta.labels]
    if not rows:
        return np.zeros((0, len(meta.labels))), np.zeros(0, dtype=np.int64)
    scorer = Scorer(folder, batch_size, trust_pickle)
    logits, _ = scorer.logits([e.text for e in rows])
    return logits, np.array([meta.labels.index(e.label) for e in rows], dtype=np.int64)


def _parent_calibration(meta: CheckpointMeta) -> Calibration | None:
    if meta.lineage is None:
        return None
    try:
        return read_meta(Path(meta.lineage.parent)).calibration
    except SentiError:  # the parent moved or is gone: nothing to keep
        return None


def calibrate_checkpoint(folder: Path, say=print, trust_pickle: bool = False) -> Calibration | None:
    """Fit the checkpoint's calibration on its dev split and record it in senti.json; returns what senti.json now
    holds. A model with aspect heads is left uncalibrated (said); a dev split of fewer than MIN_CALIBRATION_TEXTS
    texts fits nothing: a continued model keeps its parent's calibration, any other keeps the plain softmax."""
    folder = Path(folder)
    meta = read_meta(folder)
    if head_aspects(meta.labels) is not None:
        say("calibration: not fitted for aspect heads (their probabilities are the plain softmax of each head)")
        return None
    logits, gold = dev_scores(folder, trust_pickle=trust_pickle)
    if len(gold) < MIN_CALIBRATION_TEXTS:
        kept = _parent_calibration(meta)
        said = (f"kept the parent's temperature {kept.temperature:.3f} (fitted on {kept.texts} texts)" if kept
                else "probabilities stay the plain softmax")
        say(f"calibration: {len(gold)} dev texts, fewer than the {MIN_CALIBRATION_TEXTS} a temperature needs; {said}")
        calibration = kept
    else:
        calibration = fit_calibration(logits, gold)
        parent = _parent_calibration(meta)
        was = f" (the parent's was {parent.temperature:.3f}: refitted on the new dev labels)" if parent else ""
        bias = f" and per-class biases {', '.join(f'{b:+.3f}' for b in calibration.bias)}" if calibration.bias else ""
        say(f"calibration: temperature {calibration.temperature:.3f}{bias}, fitted on {len(gold)} dev texts{was}: "
            f"log-loss {calibration.log_loss_before:.4f} -> {calibration.log_loss_after:.4f}, ECE (15 equal-mass bins) "
            f"{calibration.ece_before:.4f} -> {calibration.ece_after:.4f}; --no-calibrate keeps the plain softmax")
    replace(meta, calibration=calibration).write(folder)
    return calibration
