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


def head_dev_scores(folder: Path, names: list[str], batch_size: int = 64,
                    trust_pickle: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(each head's four logits, its polarity id) for every labelled (dev text, aspect) pair of a heads checkpoint."""
    from senti.toolkit.data.aspect_units import gold_matrix, recorded_aspect_splits
    from senti.toolkit.evaluation.evaluate import Scorer

    meta = read_meta(folder)
    parts, _ = recorded_aspect_splits(meta.data, names, None, Path(folder))
    dev = parts.get("dev") or []
    if not dev:
        return np.zeros((0, 4)), np.zeros(0, dtype=np.int64)
    gold = gold_matrix(dev, names)
    logits, _ = Scorer(folder, batch_size, trust_pickle).logits([t.text for t in dev])
    grouped = logits.reshape(len(dev), len(names), -1)
    keep = gold >= 0
    return grouped[keep], gold[keep]


def _fitted(folder: Path, labels: list[str], trust_pickle: bool) -> tuple[Calibration | None, int, str]:
    """The checkpoint's calibration fitted on its dev answers (None with too few), their count, and what they are.
    Aspect heads share one fit over every labelled (text, aspect) pair: a temperature, and per-polarity biases where
    they measure better, repeated for each head (so each head's four probabilities, normalised, are calibrated)."""
    names = head_aspects(labels)
    if names is None:
        logits, gold = dev_scores(folder, trust_pickle=trust_pickle)
        what = "dev texts"
    else:
        logits, gold = head_dev_scores(folder, names, trust_pickle=trust_pickle)
        what = f"labelled dev pairs of {len(names)} aspect heads"
    if len(gold) < MIN_CALIBRATION_TEXTS:
        return None, len(gold), what
    fitted = fit_calibration(logits, gold)
    if names is not None and fitted.bias is not None:
        fitted.bias = fitted.bias * len(names)
    return fitted, len(gold), what


def _parent_calibration(meta: CheckpointMeta) -> Calibration | None:
    if meta.lineage is None:
        return None
    try:
        return read_meta(Path(meta.lineage.parent)).calibration
    except SentiError:  # the parent moved or is gone: nothing to keep
        return None


def calibrate_checkpoint(folder: Path, say=print, trust_pickle: bool = False) -> Calibration | None:
    """Fit the checkpoint's calibration on its dev split and record it in senti.json; returns what senti.json now
    holds. A dev split of fewer than MIN_CALIBRATION_TEXTS answers (texts, or a heads model's labelled pairs) fits
    nothing: a continued model keeps its parent's calibration, any other keeps the plain softmax."""
    folder = Path(folder)
    meta = read_meta(folder)
    calibration, n, what = _fitted(folder, meta.labels, trust_pickle)
    if calibration is None:
        kept = _parent_calibration(meta)
        said = (f"kept the parent's temperature {kept.temperature:.3f} (fitted on {kept.texts} of its dev answers)" if kept
                else "probabilities stay the plain softmax")
        say(f"calibration: {n} {what}, fewer than the {MIN_CALIBRATION_TEXTS} a temperature needs; {said}")
        calibration = kept
    else:
        parent = _parent_calibration(meta)
        was = f" (the parent's was {parent.temperature:.3f}: refitted on the new dev labels)" if parent else ""
        bias = " and per-class biases (vector scaling)" if calibration.bias else ""
        say(f"calibration: temperature {calibration.temperature:.3f}{bias}, fitted on {n} {what}{was}: "
            f"log-loss {calibration.log_loss_before:.4f} -> {calibration.log_loss_after:.4f}, ECE (15 equal-mass bins) "
            f"{calibration.ece_before:.4f} -> {calibration.ece_after:.4f}; --no-calibrate keeps the plain softmax")
    replace(meta, calibration=calibration).write(folder)
    return calibration
