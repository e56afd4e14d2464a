"""Scores that keep their promise: a temperature (and, where it measures better, per-class biases) fitted on dev by
log-loss, the figures that say how well a probability is calibrated, and the threshold below which an answer is
"unsure".

The model's scores are a weighted geometric mean of two distributions (core.ngram_head.combine) at a weight chosen
for accuracy, so nothing makes a 0.9 mean "right nine times in ten". Temperature scaling (Guo et al., "On
Calibration of Modern Neural Networks", ICML 2017) divides the logits by one number fitted on held-out data; it never
changes which label wins. Vector scaling adds one bias per class (the first held at zero), which can change the
winner near the boundary: it is kept only where five-fold cross-validation on dev says it predicts dev better.

Every runtime applies `calibrated_probabilities` (Python here; Node and the browser in examples/node/scorer.mjs),
in float64, so the same export gives the same probability everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from senti.core.artifacts import (
    CALIBRATION_METHODS,
    Abstention,
    Calibration,
    CalibrationFigures,
    ReliabilityBin,
)
from senti.core.errors import SentiError
from senti.core.scores import confusion_matrix, log_softmax, macro_f1, softmax

BINS = 15  # bins of the expected calibration error and of the reliability diagram
# Fewer dev texts than this fit no temperature (a continuation then keeps its parent's): a temperature from 40
# texts moved ECE by more than it fixed in the runs of docs/results/calibration.md.
MIN_CALIBRATION_TEXTS = 100
# The answered dev texts an abstention threshold needs: enough that its precision is measured to about a
# hundredth, and at least 5 / (1 - target) so a precision target has some errors to count.
MIN_THRESHOLD_TEXTS = 100
TEMPERATURE_RANGE = (0.01, 100.0)
FOLDS = 5
# Vector scaling is kept only when its cross-validated log-loss is this much (relatively) below temperature's.
VECTOR_MARGIN = 0.01


@dataclass(frozen=True)
class Target:
    """What an abstention threshold is chosen for: a precision in (0.5, 1) or a coverage in (0, 1]."""

    kind: str  # "precision" or "coverage"
    value: float

    @classmethod
    def parse(cls, text: str) -> Target:
        """From `precision=0.97` or `coverage=0.9`; SentiError saying what is wrong."""
        kind, _, value = str(text).partition("=")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if kind not in ("precision", "coverage") or not math.isfinite(number):
            raise SentiError(f"--abstain takes precision=P or coverage=C (for example precision=0.97); got '{text}'")
        if kind == "precision" and not 0.5 < number < 1.0:
            raise SentiError(f"--abstain precision must be in (0.5, 1); got {number:g}")
        if kind == "coverage" and not 0.0 < number <= 1.0:
            raise SentiError(f"--abstain coverage must be in (0, 1]; got {number:g}")
        return cls(kind, number)

    def __str__(self) -> str:
        return f"{self.kind}={self.value:g}"

    def texts_needed(self) -> int:
        """The dev texts a threshold for this target needs."""
        if self.kind == "precision":
            return max(MIN_THRESHOLD_TEXTS, math.ceil(5 / (1 - self.value)))
        return MIN_THRESHOLD_TEXTS


def scaled_logits(logits: np.ndarray, calibration: Calibration | None) -> np.ndarray:
    """The logits as calibration has them (float64): divided by the temperature, the biases added."""
    z = np.asarray(logits, dtype=np.float64)
    if calibration is None:
        return z
    z = z / float(calibration.temperature)
    return z + np.asarray(calibration.bias, dtype=np.float64) if calibration.bias is not None else z


def calibrated_probabilities(logits: np.ndarray, calibration: Calibration | None) -> np.ndarray:
    """softmax(logits / temperature + bias) per row, in float64; the plain softmax when `calibration` is None."""
    return softmax(scaled_logits(logits, calibration))  # float64 in, float64 out


def unsure_mask(probabilities: np.ndarray, abstention: Abstention | None) -> np.ndarray:
    """Which answers fall below the abstention threshold (none without one)."""
    top = np.asarray(probabilities).max(axis=1)
    return np.zeros(len(top), dtype=bool) if abstention is None else top < abstention.threshold


# --- figures -----------------------------------------------------------------------------------------------------


def log_loss(probabilities: np.ndarray, gold: np.ndarray) -> float:
    p = np.clip(np.asarray(probabilities, dtype=np.float64)[np.arange(len(gold)), gold], 1e-15, 1.0)
    return max(0.0, float(-np.log(p).mean()))  # never -0.0


def brier(probabilities: np.ndarray, gold: np.ndarray) -> float:
    """The multi-class Brier score: mean over texts of the squared distance to the one-hot answer."""
    probs = np.asarray(probabilities, dtype=np.float64)
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(gold)), gold] = 1.0
    return float(((probs - onehot) ** 2).sum(axis=1).mean())


def reliability_bins(probabilities: np.ndarray, gold: np.ndarray, bins: int = BINS,
                     mass: bool = True) -> list[ReliabilityBin]:
    """The answers' top probability against how often they were right, in `bins` bins of equal mass (each about
    the same number of texts, sorted by confidence) or of equal width over [0, 1]; empty bins left out."""
    probs = np.asarray(probabilities, dtype=np.float64)
    confidence = probs.max(axis=1)
    right = (probs.argmax(axis=1) == np.asarray(gold)).astype(np.float64)
    if mass:
        order = np.argsort(confidence, kind="stable")
        groups = [g for g in np.array_split(order, min(bins, len(order))) if len(g)]
    else:
        edges = np.linspace(0.0, 1.0, bins + 1)
        which = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, bins - 1)
        groups = [np.flatnonzero(which == b) for b in range(bins)]
        groups = [g for g in groups if len(g)]
    return [ReliabilityBin(float(confidence[g].min()), float(confidence[g].max()), len(g), float(confidence[g].mean()),
                           float(right[g].mean())) for g in groups]


def expected_calibration_error(probabilities: np.ndarray, gold: np.ndarray, bins: int = BINS,
                               mass: bool = True) -> float:
    """ECE: the text-weighted mean |accuracy - confidence| over the reliability bins (equal mass by default)."""
    table = reliability_bins(probabilities, gold, bins, mass)
    n = sum(b.texts for b in table)
    return float(sum(b.texts * abs(b.accuracy - b.confidence) for b in table) / max(n, 1))


def risk_coverage(probabilities: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(coverage, risk): answering the k most confident texts, k = 1..n, the share answered and the error rate
    among them."""
    probs = np.asarray(probabilities, dtype=np.float64)
    order = np.argsort(-probs.max(axis=1), kind="stable")
    wrong = (probs.argmax(axis=1) != np.asarray(gold))[order].astype(np.float64)
    k = np.arange(1, len(order) + 1)
    return k / len(order), np.cumsum(wrong) / k


def aurc(probabilities: np.ndarray, gold: np.ndarray) -> float:
    """The area under the risk-coverage curve (lower is better: errors kept to the least confident answers)."""
    return float(risk_coverage(probabilities, gold)[1].mean())


def accuracy_at_coverage(probabilities: np.ndarray, gold: np.ndarray, coverage: float) -> float:
    """Accuracy on the most confident `coverage` share of the texts."""
    share, risk = risk_coverage(probabilities, gold)
    k = max(1, math.ceil(coverage * len(share) - 1e-9))
    return float(1.0 - risk[k - 1])


COVERAGES = (0.8, 0.9, 0.95)


def figures(probabilities: np.ndarray, gold: np.ndarray) -> CalibrationFigures:
    probs = np.asarray(probabilities, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.int64)
    return CalibrationFigures(
        texts=len(gold), accuracy=float((probs.argmax(1) == gold).mean()),
        mean_confidence=float(probs.max(1).mean()), ece=expected_calibration_error(probs, gold),
        ece_width=expected_calibration_error(probs, gold, mass=False), brier=brier(probs, gold),
        log_loss=log_loss(probs, gold), aurc=aurc(probs, gold),
        accuracy_at={f"{c:g}": accuracy_at_coverage(probs, gold, c) for c in COVERAGES})


# --- fitting -----------------------------------------------------------------------------------------------------


def smoothed_targets(gold: np.ndarray, classes: int) -> np.ndarray:
    """Platt's targets ("Probabilistic outputs for support vector machines", 1999), per class: a text of a class
    with N dev texts aims at (N + 1) / (N + 2) on its label, the rest shared by the others. On a dev split the model
    gets entirely right, hard targets drive the temperature to zero (every answer 1.0); these keep it finite and
    move a fit on a thousand texts by a thousandth."""
    counts = np.bincount(gold, minlength=classes).astype(np.float64)
    keep = (counts[gold] + 1) / (counts[gold] + 2)
    targets = np.repeat(((1 - keep) / max(classes - 1, 1))[:, None], classes, axis=1)
    targets[np.arange(len(gold)), gold] = keep
    return targets


def _fit_parameters(logits: np.ndarray, gold: np.ndarray, method: str) -> tuple[float, list[float] | None]:
    """(temperature, bias) minimising the mean log-loss of `logits` on `gold`."""
    from scipy.optimize import minimize, minimize_scalar

    z = np.asarray(logits, dtype=np.float64)
    targets = smoothed_targets(gold, z.shape[1])
    lo, hi = (math.log(b) for b in TEMPERATURE_RANGE)

    def loss(theta: np.ndarray) -> float:
        scaled = z * math.exp(-theta[0])
        if len(theta) > 1:
            scaled = scaled + np.concatenate([[0.0], theta[1:]])
        return float(-(targets * log_softmax(scaled)).sum(1).mean())

    best = minimize_scalar(lambda s: loss(np.array([s])), bounds=(lo, hi), method="bounded",
                           options={"xatol": 1e-7})
    if method == "temperature":
        return math.exp(float(best.x)), None
    start = np.concatenate([[float(best.x)], np.zeros(z.shape[1] - 1)])
    bounds = [(lo, hi)] + [(-20.0, 20.0)] * (z.shape[1] - 1)
    found = minimize(loss, start, method="L-BFGS-B", bounds=bounds)
    return math.exp(float(found.x[0])), [0.0, *(float(b) for b in found.x[1:])]


def _held_out_loss(logits: np.ndarray, gold: np.ndarray, method: str, seed: int = 0) -> float:
    """The method's log-loss on each fold of dev when fitted on the other folds."""
    order = np.random.default_rng(seed).permutation(len(gold))
    losses = []
    for part in np.array_split(order, FOLDS):
        rest = np.setdiff1d(order, part)
        t, b = _fit_parameters(logits[rest], gold[rest], method)
        probs = calibrated_probabilities(logits[part], Calibration(t, b, method))
        losses.append(log_loss(probs, gold[part]) * len(part))
    return float(sum(losses) / len(gold))


def _vector_fit(logits: np.ndarray, gold: np.ndarray) -> tuple[float, list[float] | None] | None:
    """Vector scaling's (temperature, bias) where it measures better than a temperature alone, for three or more
    classes: its cross-validated log-loss is lower by VECTOR_MARGIN and its answers lose no macro-F1 on dev; else
    None. Biases fitted for log-loss pull the answers back toward the training prior, undoing the logit adjustment
    that dev chose for macro-F1 (on six unbalanced classes they cost 2.8 points of test macro-F1,
    docs/results/calibration.md). Two classes: never (a bias there only moves the decision threshold, which dev
    already chose for accuracy)."""
    if logits.shape[1] <= 2:
        return None
    if _held_out_loss(logits, gold, "vector") >= (1 - VECTOR_MARGIN) * _held_out_loss(logits, gold, "temperature"):
        return None
    t, bias = _fit_parameters(logits, gold, "vector")
    k = logits.shape[1]
    moved = calibrated_probabilities(logits, Calibration(t, bias, "vector")).argmax(1)
    keeps = macro_f1(confusion_matrix(gold, moved, k)) >= macro_f1(confusion_matrix(gold, logits.argmax(1), k))
    return (t, bias) if keeps else None


def fit_calibration(logits: np.ndarray, gold: np.ndarray, method: str = "auto", fitted_on: str = "dev",
                    min_texts: int = MIN_CALIBRATION_TEXTS) -> Calibration:
    """The calibration of `logits` [texts, classes] fitted on the class ids `gold` by log-loss: a temperature, or
    with `method="vector"` a temperature and per-class biases; `auto` keeps vector scaling only where it measures
    better (`_vector_fit`). SentiError when there are fewer than `min_texts` texts (an experiment measuring
    what a few labels do may lower it)."""
    logits = np.asarray(logits, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.int64)
    if len(gold) < min_texts:
        raise SentiError(f"calibration needs at least {min_texts} labelled {fitted_on} texts; got {len(gold)}")
    if method not in ("auto", *CALIBRATION_METHODS):
        raise SentiError(f"calibration method must be auto, {' or '.join(CALIBRATION_METHODS)}; got '{method}'")
    vector = _vector_fit(logits, gold) if method == "auto" else None
    if method == "auto":
        method = "temperature" if vector is None else "vector"
    temperature, bias = vector or _fit_parameters(logits, gold, method)
    fitted = Calibration(temperature, bias, method, texts=len(gold), fitted_on=fitted_on)
    before, after = softmax(logits), calibrated_probabilities(logits, fitted)
    fitted.log_loss_before, fitted.log_loss_after = log_loss(before, gold), log_loss(after, gold)
    fitted.ece_before = expected_calibration_error(before, gold)
    fitted.ece_after = expected_calibration_error(after, gold)
    return fitted


def choose_threshold(probabilities: np.ndarray, gold: np.ndarray, target: Target) -> Abstention:
    """The abstention threshold on these (dev) texts for `target`: for a precision, the lowest threshold whose
    answered texts (top probability >= threshold) are right at least that often; for a coverage, the highest
    threshold that answers at least that share. SentiError when the texts are too few or no threshold reaches it."""
    probs = np.asarray(probabilities, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.int64)
    if len(gold) < target.texts_needed():
        raise SentiError(f"an abstention threshold for {target} needs at least {target.texts_needed()} labelled dev "
                         f"texts; the dev split has {len(gold)}")
    confidence = probs.max(1)
    right = probs.argmax(1) == gold
    order = np.argsort(-confidence, kind="stable")
    sorted_conf, hits = confidence[order], np.cumsum(right[order])
    # only cut between distinct confidences: every text at the threshold is answered
    last_of_value = np.flatnonzero(np.append(sorted_conf[1:] < sorted_conf[:-1], True))
    counts = last_of_value + 1
    precision = hits[last_of_value] / counts
    if target.kind == "precision":
        fine = np.flatnonzero(precision >= target.value)
        if len(fine) == 0:
            raise SentiError(f"no threshold reaches precision {target.value:g} on {len(gold)} dev texts "
                             f"(the most confident text alone is {'right' if right[order[0]] else 'wrong'})")
        pick = fine[-1]
    else:
        pick = int(np.flatnonzero(counts >= math.ceil(target.value * len(gold) - 1e-9))[0])
    k = counts[pick]
    return Abstention(threshold=float(sorted_conf[last_of_value[pick]]), target=str(target), texts=len(gold),
                      dev_coverage=float(k / len(gold)), dev_precision=float(precision[pick]))
