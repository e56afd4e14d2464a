"""What the calibration page says beside its tables, for one model's own dev and test splits.

    python -m experiments.calibration_variants --model runs/cal-e5/export [--bootstrap 1000]

MODEL: an export folder or a checkpoint. Prints the test ECE of a temperature and of vector scaling fitted on dev
(with each one's five-fold cross-validated dev log-loss, and its accuracy and macro-F1 on dev and test), a
bootstrap 95% interval of the test ECE over the test texts (plain softmax and calibrated), and on dev and test the
largest share answered at precision 0.965 and 0.97 and the precision of the 88% and 90% most confident texts.
"""

from __future__ import annotations

import argparse

import numpy as np

from senti.core.calibration import _held_out_loss, calibrated_probabilities, expected_calibration_error, fit_calibration
from senti.core.scores import confusion_matrix, macro_f1


def methods(dev: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]) -> None:
    for method in ("temperature", "vector"):
        fitted = fit_calibration(dev[0], dev[1], method)
        probs = calibrated_probabilities(test[0], fitted)
        answers = {name: (calibrated_probabilities(z, fitted).argmax(1), g) for name, (z, g) in
                   (("dev", dev), ("test", test))}
        said = "; ".join(f"{name} accuracy {(a == g).mean():.4f}, macro-F1 "
                         f"{macro_f1(confusion_matrix(g, a, dev[0].shape[1])):.4f}" for name, (a, g) in answers.items())
        print(f"{method}: temperature {fitted.temperature:.4f}, bias {fitted.bias}, cross-validated dev log-loss "
              f"{_held_out_loss(dev[0], dev[1], method):.5f}; test ECE {expected_calibration_error(probs, test[1]):.4f}; "
              f"{said}")


def bootstrap(probs: np.ndarray, gold: np.ndarray, rounds: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(gold), len(gold)) for _ in range(rounds)]
    return np.percentile([expected_calibration_error(probs[i], gold[i]) for i in draws], [2.5, 97.5])


def coverage_curve(name: str, probs: np.ndarray, gold: np.ndarray) -> None:
    order = np.argsort(-probs.max(1), kind="stable")
    precision = np.cumsum((probs.argmax(1) == gold)[order]) / np.arange(1, len(gold) + 1)
    reach = {t: (np.flatnonzero(precision >= t)[-1] + 1) / len(gold) for t in (0.965, 0.97)}
    at = {c: precision[int(c * len(gold)) - 1] for c in (0.88, 0.9)}
    print(f"{name}: largest share answered at precision 0.965 {reach[0.965]:.1%}, at 0.97 {reach[0.97]:.1%}; "
          f"precision of the 88% / 90% most confident {at[0.88]:.4f} / {at[0.9]:.4f}")


def main(argv: list[str] | None = None) -> None:
    from senti.toolkit.evaluation.evaluate import Scorer, _rows_to_score

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="an export folder or a checkpoint, with a calibration")
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)
    scorer = Scorer(args.model, backend="onnx")
    splits = {}
    for split in ("dev", "test"):
        rows, _ = _rows_to_score(scorer.labels, scorer.recipe, None, split, scorer.folder)
        gold = np.array([scorer.labels.index(e.label) for e in rows])
        splits[split] = (scorer.logits([e.text for e in rows])[0], gold)
    methods(splits["dev"], splits["test"])
    logits, gold = splits["test"]
    for name, calibration in (("plain softmax", None), ("calibrated", scorer.calibration)):
        probs = calibrated_probabilities(logits, calibration)
        low, high = bootstrap(probs, gold, args.bootstrap)
        print(f"test ECE, {name}: {expected_calibration_error(probs, gold):.4f} (bootstrap 95% {low:.3f}-{high:.3f})")
    for split, (logits, gold) in splits.items():
        coverage_curve(split, calibrated_probabilities(logits, scorer.calibration), gold)


if __name__ == "__main__":
    main()
