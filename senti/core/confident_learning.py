"""Finding wrong labels: confident learning over out-of-fold probabilities.

Northcutt, Jiang and Chuang, "Confident Learning: Estimating Uncertainty in Dataset Labels" (JAIR 70, 2021),
implemented here from the paper (the cleanlab package is AGPL-3.0, so senti does not depend on it):

1. per class j, a threshold t_j: the mean probability of j over the rows given label j (its self-confidence);
2. the confident joint C[i, j]: rows given label i whose likeliest class among those at or above their threshold
   is j (a row above no threshold counts nowhere);
3. calibrated so that each row of C sums to the number of rows given that label, then normalised into the joint
   Q[i, j] of given label i and true label j; the noise of class i is 1 - Q[i, i] / sum_j Q[i, j];
4. pruned by noise rate: for each i != j, the round(n * Q[i, j]) rows given i with the largest margin p_j - p_i
   are suspects, never a row whose likeliest class is its given label, and never so many that a class keeps fewer
   than one row.

The probabilities must come from models that did not see the row (k-fold): a model that learnt a wrong label
agrees with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from senti.core.errors import SentiError


@dataclass(frozen=True)
class NoiseEstimate:
    """What the confident joint says of a labelled set: every figure indexed by the label set's order."""

    thresholds: np.ndarray  # [k] per-class self-confidence thresholds
    confident_joint: np.ndarray  # [k, k] counts: given label (row) by confident true label (column)
    joint: np.ndarray  # [k, k] the calibrated joint distribution, summing to 1
    given_counts: np.ndarray  # [k] rows given each label

    @property
    def noise_per_class(self) -> np.ndarray:
        """Share of the rows given each label whose true label is another, as the joint estimates it."""
        rows = self.joint.sum(1)
        return np.where(rows > 0, 1 - np.diag(self.joint) / np.maximum(rows, 1e-300), 0.0)

    @property
    def noise_count(self) -> int:
        """The estimated number of wrong labels: n times the joint's off-diagonal mass."""
        return int(round(self.given_counts.sum() * (1 - np.trace(self.joint))))


@dataclass(frozen=True)
class Suspect:
    """A row whose given label is confidently another."""

    index: int  # the row's position in the audited set
    given: int
    suggested: int
    margin: float  # p[suggested] - p[given], in (0, 1]: the ranking
    self_confidence: float  # p[given]


def check_inputs(probabilities: np.ndarray, given: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    probabilities = np.asarray(probabilities, dtype=np.float64)
    given = np.asarray(given, dtype=np.int64)
    if probabilities.ndim != 2 or probabilities.shape[0] != given.shape[0] or probabilities.shape[1] < 2:
        raise SentiError(f"probabilities {probabilities.shape} do not match {given.shape[0]} labels of 2+ classes")
    if given.size and (given.min() < 0 or given.max() >= probabilities.shape[1]):
        raise SentiError(f"a label index outside 0..{probabilities.shape[1] - 1}")
    if not np.isfinite(probabilities).all():
        raise SentiError("probabilities hold NaN or infinity")
    return probabilities, given


def estimate_noise(probabilities: np.ndarray, given: np.ndarray) -> NoiseEstimate:
    """Steps 1-3: thresholds, the confident joint and its calibrated joint."""
    probabilities, given = check_inputs(probabilities, given)
    k = probabilities.shape[1]
    counts = np.bincount(given, minlength=k).astype(np.float64)
    thresholds = np.array([probabilities[given == j, j].mean() if counts[j] else 1.0 for j in range(k)])
    above = probabilities >= thresholds - 1e-12  # the paper's >=, robust to the mean's rounding
    confident = np.where(above, probabilities, -np.inf).argmax(1)
    any_above = above.any(1)
    joint_counts = np.zeros((k, k), dtype=np.int64)
    np.add.at(joint_counts, (given[any_above], confident[any_above]), 1)
    row_sums = joint_counts.sum(1, keepdims=True).astype(np.float64)
    calibrated = np.where(row_sums > 0, joint_counts / np.maximum(row_sums, 1) * counts[:, None], 0.0)
    total = calibrated.sum()
    joint = calibrated / total if total > 0 else np.eye(k) / k
    return NoiseEstimate(thresholds, joint_counts, joint, counts.astype(np.int64))


def find_suspects(probabilities: np.ndarray, given: np.ndarray,
                  estimate: NoiseEstimate | None = None) -> list[Suspect]:
    """Step 4 (prune by noise rate): the suspects, largest margin first."""
    probabilities, given = check_inputs(probabilities, given)
    estimate = estimate or estimate_noise(probabilities, given)
    n, k = probabilities.shape
    likeliest = probabilities.argmax(1)
    suspects: list[Suspect] = []
    for i in range(k):
        rows = np.flatnonzero((given == i) & (likeliest != i))
        best: dict[int, Suspect] = {}  # a row picked for two true classes keeps the larger margin
        for j in range(k):
            wanted = int(round(n * estimate.joint[i, j])) if j != i else 0
            margins = probabilities[rows, j] - probabilities[rows, i]
            for r in rows[np.argsort(-margins, kind="stable")][:wanted]:
                margin = float(probabilities[r, j] - probabilities[r, i])
                if margin > 0 and (r not in best or best[r].margin < margin):
                    best[int(r)] = Suspect(int(r), i, j, margin, float(probabilities[r, i]))
        ranked = sorted(best.values(), key=lambda s: (-s.margin, s.index))
        suspects += ranked[:max(0, int(estimate.given_counts[i]) - 1)]  # a class keeps one row at least
    return sorted(suspects, key=lambda s: (-s.margin, s.index))


def both_flag(first: list[Suspect], second: list[Suspect]) -> list[Suspect]:
    """Rows two audits flag with the same suggested label, ranked by the smaller of their two margins."""
    other = {s.index: s for s in second}
    kept = [s if s.margin <= other[s.index].margin else other[s.index]
            for s in first if s.index in other and other[s.index].suggested == s.suggested]
    return sorted(kept, key=lambda s: (-s.margin, s.index))
