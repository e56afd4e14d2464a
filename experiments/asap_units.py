"""Sentence-level training rows from ASAP's aspect labels: each unit of a review that mentions an aspect (the team's
keywords) labelled with the review's gold polarity on that aspect, to continue a sentence model on.

    python -m experiments.asap_units --data asap-sample/ --output asap-units/ [--unit sentence] [--dev-share 0.2]

Only positive and negative aspect labels make rows (a two-class model; neutral stays the answer's margin); a unit
that mentions aspects of opposite gold polarities is left out. The reviews of the train split are divided by review
(seeded) into the folder's train.tsv and dev.tsv (test.tsv repeats dev: the real test is `asap_aspects` on ASAP's
dev split, which no row comes from). Then, for example:

    senti train --model PARENT --dataset asap-units/ --replay chnsenticorp/ --output-dir asap-model
    senti export --model asap-model --output-dir asap-export
    python -m experiments.asap_aspects --data asap-sample/ --model asap-export
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from experiments.asap_aspects import read_asap
from experiments.surge_loop import _write_tsv


def unit_rows(reviews: list[dict], aspects, unit: str) -> list[tuple[str, str]]:
    """(label, unit text) of each unit that mentions aspects whose gold polarities agree (positive or negative)."""
    from senti.serving.aspects import mentions

    rows: dict[str, set[str]] = {}
    for review in reviews:
        for name, evidence in mentions(review["text"], aspects, unit).items():
            gold = review["gold"][name]
            if gold in ("positive", "negative"):
                for e in evidence:
                    rows.setdefault(e.text, set()).add(gold)
    return [(next(iter(said)), text) for text, said in rows.items() if len(said) == 1]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--unit", default="sentence")
    parser.add_argument("--dev-share", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from senti.core.aspects import read_aspects

    data = Path(args.data)
    aspects = read_aspects(data / "aspects.json")
    reviews = read_asap(data / "train.csv", [a.name for a in aspects])
    random.Random(args.seed).shuffle(reviews)
    cut = int(len(reviews) * (1 - args.dev_share))
    out = Path(args.output)
    counts = {}
    for split, part in (("train", reviews[:cut]), ("dev", reviews[cut:])):
        rows = unit_rows(part, aspects, args.unit)
        _write_tsv(out / f"{split}.tsv", [_Row(label, text) for label, text in rows])
        counts[split] = {"reviews": len(part), "rows": len(rows),
                         "negative": sum(label == "negative" for label, _ in rows)}
        if split == "dev":
            _write_tsv(out / "test.tsv", [_Row(label, text) for label, text in rows])
    print(counts)
    return counts


class _Row:
    def __init__(self, label: str, text: str):
        self.label, self.text = label, text


if __name__ == "__main__":
    main()
