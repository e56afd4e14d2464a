"""Calibration measured through `senti.serving`: a checkpoint's export on its own test split and on far domains.

    python -m experiments.calibration --model CHECKPOINT --output DIR \
        [--root online_shopping/] [--domains fruit,shampoo,...] [--abstain precision=0.97] [--draws 1,2,3]

The checkpoint is calibrated on its dev split first if its senti.json records no calibration (as `senti train` now
does after training), then exported (ONNX, with `--abstain`'s threshold chosen on the whole dev split) into
DIR/export unless it is there. Each set (the model's own test split, then each domain's test split, none of whose
labels the model or its temperature saw) is scored by `Predictor` with the onnx backend: accuracy, ECE (15 equal-mass
bins, and equal-width), Brier and log-loss of the plain softmax and of the calibrated answers, accuracy at 90%
coverage, the dev threshold's share answered and its precision there, and the share that must go to people for the
rest to reach the target precision (chosen on that set itself: an oracle, the best any threshold could do). Then,
for each domain and each seed in --draws, a temperature refitted on --loop-labels random labelled texts of the
domain's dev split (the surge loop's new dev labels), scored on the domain's test split. Writes DIR/report.json.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from senti.core.calibration import (
    Target,
    accuracy_at_coverage,
    calibrated_probabilities,
    expected_calibration_error,
    figures,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a checkpoint folder (senti train, senti distill)")
    parser.add_argument("--output", required=True)
    parser.add_argument("--root", default=None, help="a folder of far domains, each in ChnSentiCorp's layout")
    parser.add_argument("--domains", default="fruit,shampoo,clothes,tablets,phones,mengniu_dairy,water_heaters")
    parser.add_argument("--abstain", default="precision=0.97")
    parser.add_argument("--draws", default="1,2,3", help="seeds of the random dev labels a temperature is refitted on")
    parser.add_argument("--loop-labels", default="40,100", help="how many dev labels each refit draws")
    return parser


def prepared_export(model: Path, out: Path, abstain: str) -> Path:
    """The checkpoint calibrated (if it was not) and exported to ONNX with the abstention threshold."""
    from senti.core.checkpoint import read_meta
    from senti.export.pipeline import ExportConfig
    from senti.toolkit.evaluation.calibrate import calibrate_checkpoint
    from senti.toolkit.training.exporting import export_checkpoint

    if read_meta(model).calibration is None:
        calibrate_checkpoint(model)
    export = out / "export"
    if not (export / "export.json").is_file():
        export_checkpoint(ExportConfig(model=str(model), output_dir=str(export), formats=("onnx",), abstain=abstain))
    return export


def rows_of(predictor, dataset: str | None, split: str) -> tuple[list[str], np.ndarray]:
    """A split's texts and gold ids: the model's own data cut as its recipe says (`dataset` None), or a folder's
    split file (in ChnSentiCorp's layout 0/1 read as the model's label names), as `senti eval` reads them."""
    from senti.toolkit.evaluation.evaluate import domain_rows

    labels = predictor.labels
    rows = next(iter(domain_rows([dataset or predictor.meta.data.dataset], split, labels, predictor.export_dir,
                                 predictor.meta.data if dataset is None else None).values()))
    return [e.text for e in rows], np.array([labels.index(e.label) for e in rows])


def oracle_share(probs: np.ndarray, gold: np.ndarray, precision: float) -> float:
    """The least share of the set to hand to people (least confident first) for the rest to reach `precision`."""
    order = np.argsort(-probs.max(1), kind="stable")
    right = (probs.argmax(1) == gold)[order]
    precisions = np.cumsum(right) / np.arange(1, len(right) + 1)
    reaching = np.flatnonzero(precisions >= precision)
    return 1.0 - (reaching[-1] + 1) / len(right) if len(reaching) else 1.0


def set_figures(predictor, texts: list[str], gold: np.ndarray, target: Target) -> dict:
    """One set through the runtime: the softmax's and the calibrated answers' figures, the dev threshold there."""
    logits = predictor.logits(texts, 64)[0]
    raw, probs = calibrated_probabilities(logits, None), calibrated_probabilities(logits, predictor.calibration)
    answered = probs.max(1) >= predictor.abstain.threshold
    return {"texts": len(gold), "softmax": figures(raw, gold).to_json(), "calibrated": figures(probs, gold).to_json(),
            "accuracy_at_90": accuracy_at_coverage(probs, gold, 0.9),
            "dev_threshold": {"answered": float(answered.mean()),
                              "precision": float((probs.argmax(1) == gold)[answered].mean()) if answered.any()
                              else None},
            "oracle_share_to_people": oracle_share(probs, gold, target.value) if target.kind == "precision" else None,
            "logits": logits}


def refits(logits_dev: np.ndarray, gold_dev: np.ndarray, logits_test: np.ndarray, gold_test: np.ndarray,
           draws: list[int], sizes: list[int]) -> dict:
    """ECE on the test split of a temperature fitted on `size` random dev labels, per size and seed."""
    from senti.core.calibration import fit_calibration

    out: dict = {}
    for size in sizes:
        if size > len(gold_dev):
            continue
        eces = []
        for seed in draws:
            pick = np.random.default_rng(seed).choice(len(gold_dev), size, replace=False)
            fitted = fit_calibration(logits_dev[pick], gold_dev[pick], "temperature", min_texts=1)
            probs = calibrated_probabilities(logits_test, fitted)
            eces.append({"seed": seed, "temperature": fitted.temperature,
                         "ece": expected_calibration_error(probs, gold_test)})
        out[str(size)] = {"runs": eces, "median_ece": float(np.median([e["ece"] for e in eces]))}
    return out


def main(argv: list[str] | None = None) -> None:
    from senti.serving import Predictor

    args = _parser().parse_args(argv)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    export = prepared_export(Path(args.model), out, args.abstain)
    predictor = Predictor.load(export, backend="onnx")
    target = Target.parse(args.abstain)
    assert predictor.calibration and predictor.abstain and predictor.meta.data, "exported above with both"
    report: dict = {"model": str(Path(args.model).resolve()), "calibration": predictor.calibration.to_json(),
                    "abstain": predictor.abstain.to_json(), "sets": {}}
    own = set_figures(predictor, *rows_of(predictor, None, "test"), target)
    own.pop("logits")
    report["sets"][Path(predictor.meta.data.dataset).name] = own
    for name in (args.domains.split(",") if args.root else []):
        domain = str(Path(args.root) / name)
        test_texts, gold_test = rows_of(predictor, domain, "test")
        result = set_figures(predictor, test_texts, gold_test, target)
        dev_texts, gold_dev = rows_of(predictor, domain, "dev")
        result["refit"] = refits(predictor.logits(dev_texts, 64)[0], gold_dev, result.pop("logits"), gold_test,
                                 [int(s) for s in args.draws.split(",")], [int(s) for s in args.loop_labels.split(",")])
        report["sets"][name] = result
        (out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        print(name, json.dumps({k: v for k, v in result.items() if k != "refit"})[:300], flush=True)
    (out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    print(table(report))


def table(report: dict) -> str:
    """The report as the results page's table (markdown)."""
    lines = ["| set | texts | accuracy | ECE softmax | ECE calibrated | ECE width (cal.) | Brier softmax -> cal. | "
             "log-loss softmax -> cal. | acc @90% | dev threshold: answered, precision | to people for the target |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in report["sets"].items():
        raw, cal, dev = s["softmax"], s["calibrated"], s["dev_threshold"]
        share = s["oracle_share_to_people"]
        lines.append(f"| {name} | {s['texts']} | {cal['accuracy']:.4f} | {raw['ece']:.3f} | **{cal['ece']:.3f}** | "
                     f"{cal['ece_width']:.3f} | {raw['brier']:.4f} -> {cal['brier']:.4f} | "
                     f"{raw['log_loss']:.4f} -> {cal['log_loss']:.4f} | {s['accuracy_at_90']:.4f} | "
                     f"{dev['answered']:.1%}, {dev['precision'] if dev['precision'] is not None else math.nan:.4f} | "
                     f"{'-' if share is None else f'{share:.1%}'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
