"""`senti eval`'s tables: one split's figures, the per-domain table, and the calibration figures beside accuracy."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from senti.cli.common import console, shown


def print_split(result, output: Path, plots: list[Path]) -> None:
    """One split's figures (`result`: an EvalRecord), written to `output`; `plots`: the plots drawn beside it."""
    result.write_to(output)
    seed = result.data.seed if result.data else None
    cut = f", seed {seed}" if seed is not None else ""
    console.print(f"{result.split} of {result.dataset}{cut}, scored by {result.backend}: accuracy "
                  f"[bold]{result.accuracy:.4f}[/], macro-F1 [bold]{result.macro_f1:.4f}[/] on {result.n} texts")
    b = result.baseline
    if b is not None and b.skipped:
        console.print(f"baseline skipped: {b.skipped}")
    elif b is not None and b.scored is not None:
        console.print(f"baseline ({b.model}, fitted in {b.fit_seconds or 0:.0f} s on {b.train_rows} training "
                      f"rows): accuracy [bold]{b.scored.accuracy:.4f}[/], macro-F1 {b.scored.macro_f1:.4f}"
                      f" on the same texts; model - baseline: {result.accuracy - b.scored.accuracy:+.4f}")
    if result.seen_in_training:
        from senti.toolkit.data.seen import describe

        console.print(describe(result.seen_in_training, result.n))
    _print_classes(result)
    _print_calibration(result)
    print_plots(plots)
    console.print(f"written: {output}")


def _print_classes(result) -> None:
    """Per-class figures and the confusion matrix of an EvalRecord."""
    per_class = Table(title="per class")
    for col in ("label", "precision", "recall", "F1", "texts"):
        per_class.add_column(col, justify="right")
    for lab in result.labels:
        per_class.add_row(lab, f"{result.per_class_precision[lab]:.4f}", f"{result.per_class_recall[lab]:.4f}",
                          f"{result.per_class_f1[lab]:.4f}", str(result.support[lab]))
    console.print(per_class)
    table = Table(title="confusion matrix (rows: true, columns: predicted)")
    table.add_column("")
    for lab in result.labels:
        table.add_column(lab, justify="right")
    for lab, row in zip(result.labels, result.confusion_matrix):
        table.add_row(lab, *map(str, row))
    console.print(table)


def print_plots(plots: list[Path]) -> None:
    if plots:
        console.print(f"plots: {plots[0]} (reliability), {plots[1]} (risk-coverage)", markup=False)


def _print_calibration(result) -> None:
    """Do the probabilities mean what they say: the model's plain softmax, its calibrated answers and the baseline's
    on the same texts (`result`: an EvalRecord), then the abstention threshold's figures."""
    c = result.calibration
    if c is None:
        return
    table = Table(title=f"calibration on these {result.n} texts (ECE: 15 bins of equal mass, and of equal width)")
    for col in ("scores", "accuracy", "confidence", "ECE", "ECE width", "Brier", "log-loss", "AURC"):
        table.add_column(col, justify="right")
    rows = [("model, softmax", c.raw)]
    if c.calibrated is not None:
        rows.append((f"model, calibrated (T={c.temperature:.3f})", c.calibrated))
    b = result.baseline.scored if result.baseline else None
    if b is not None and b.calibration is not None:
        rows.append(("n-gram baseline", b.calibration))
    for name, f in rows:
        table.add_row(name, *(f"{v:.4f}" for v in (f.accuracy, f.mean_confidence, f.ece, f.ece_width, f.brier,
                                                   f.log_loss, f.aurc)))
    console.print(table)
    given = c.calibrated or c.raw
    console.print("accuracy on the most confident 80% / 90% / 95% of the texts: " +
                  " / ".join(f"{given.accuracy_at[k]:.4f}" for k in ("0.8", "0.9", "0.95")), markup=False)
    if c.abstain is not None:
        a = c.abstain
        console.print(f"unsure below {a.threshold:.4f} (chosen on dev for {a.target}): {a.unsure} of {result.n} "
                      f"unsure, the other {a.coverage:.1%} answered at precision {a.precision:.4f}", markup=False)


def print_domains(report, output: Path, plots: list[Path]) -> None:
    """The per-domain tables, and the record (a DomainReport) written to `output`; `plots`: drawn beside it."""
    report.write_to(output)
    table = Table(title=f"{report.split} split per domain, scored by {report.backend}")
    for col in ("domain", "texts", "accuracy", "macro-F1", "baseline", "baseline F1", "model - baseline",
                "seen in training"):
        table.add_column(col, justify="right")
    calibration = Table(title="calibration per domain")
    for col in ("domain", "ECE softmax", "ECE", "log-loss", "baseline ECE", "acc @90%", "answered", "precision"):
        calibration.add_column(col, justify="right")
    for name, r in report.domains.items():
        b = r.baseline.scored if r.baseline else None
        seen = r.seen_in_training
        table.add_row(shown(name), str(r.n), f"{r.accuracy:.4f}", f"{r.macro_f1:.4f}",
                      f"{b.accuracy:.4f}" if b else "-", f"{b.macro_f1:.4f}" if b else "-",
                      f"{r.accuracy - b.accuracy:+.4f}" if b else "-", str(seen.texts) if seen else "-")
        calibration.add_row(shown(name), *_calibration_cells(r.calibration, b))
    console.print(table)
    console.print(calibration)
    console.print("ECE: 15 bins of equal mass; acc @90%: accuracy on the 90% most confident texts; answered and "
                  "precision: at the export's abstention threshold (- without one)", markup=False)
    first = next(iter(report.domains.values()), None)
    if first is not None and first.baseline is not None and first.baseline.model:
        b = first.baseline
        console.print(f"baseline: {b.model}, fitted once in {b.fit_seconds or 0:.0f} s on the model's "
                      f"{b.train_rows} training rows")
    print_plots(plots)
    console.print(f"written: {output}")


def _calibration_cells(c, baseline) -> list[str]:
    """A domain's calibration cells: ECE of the softmax and of the answers given, the baseline's, accuracy at 90%
    coverage, and the share answered and its precision at the abstention threshold."""
    if c is None:
        return ["-"] * 7
    given = c.calibrated or c.raw
    cells = [f"{c.raw.ece:.4f}", f"{given.ece:.4f}", f"{given.log_loss:.4f}",
             f"{baseline.calibration.ece:.4f}" if baseline is not None and baseline.calibration else "-",
             f"{given.accuracy_at['0.9']:.4f}"]
    return cells + ([f"{c.abstain.coverage:.1%}", f"{c.abstain.precision:.4f}"] if c.abstain else ["-", "-"])
