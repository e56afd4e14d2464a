"""How far labellers agree: Cohen's kappa per pair and per label, the raw agreement, and the disagreements.

Each labeller's answers come from label logs (`senti label`): a line's `by` names who answered (the page's name
field), else the log file does. A labeller's last answer per text counts; skips, undos and aspect answers do not.
Kappa is scikit-learn's `cohen_kappa_score` over the texts both of a pair labelled; per label, the same over "this
label or another" (Artstein and Poesio, "Inter-Coder Agreement for Computational Linguistics", 2008).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from senti.core.errors import DataError
from senti.toolkit.data.label_log import ASPECT_ANSWER, UNLABELLED, log_lines

IGNORED = (*UNLABELLED, ASPECT_ANSWER, "drop")


@dataclass
class PairAgreement:
    first: str
    second: str
    texts: int  # labelled by both
    raw: float  # share given the same label
    kappa: float | None  # None when both gave one single label throughout (kappa is undefined)
    per_label: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Disagreement:
    id: str
    text: str
    labels: dict[str, str]  # labeller -> label


@dataclass
class AgreementReport:
    labellers: dict[str, int]  # labeller -> texts labelled
    pairs: list[PairAgreement]
    disagreements: list[Disagreement]


def labeller_answers(paths: list[Path]) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """({labeller: {text id: label}}, {text id: text}) from label logs, each labeller's last answer per text."""
    answers: dict[str, dict[str, str]] = {}
    texts: dict[str, str] = {}
    for path in paths:
        for record, _ in log_lines(Path(path)):  # the label log's own reader: whole lines, checked
            who = str(record.get("by") or Path(path).name)
            pid = str(record["id"])
            texts.setdefault(pid, str(record["text"]))
            if record["answer"] in IGNORED:
                answers.setdefault(who, {}).pop(pid, None)  # an undone or skipped text counts no more
            else:
                answers.setdefault(who, {})[pid] = str(record["label"])
    return {who: got for who, got in answers.items() if got}, texts


def _kappa(first: list[str], second: list[str]) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    if len(set(first) | set(second)) < 2:
        return None
    return float(cohen_kappa_score(first, second))


def agreement(paths: list[Path]) -> AgreementReport:
    """Agreement between every pair of labellers who labelled a text in common; DataError with fewer than two."""
    answers, texts = labeller_answers(paths)
    if len(answers) < 2:
        raise DataError(f"{', '.join(map(str, paths))}: answers by {len(answers)} labeller(s) "
                        f"({', '.join(answers) or 'none'}); agreement needs two who labelled the same texts")
    pairs: list[PairAgreement] = []
    split: dict[str, dict[str, str]] = {}
    for a, b in combinations(sorted(answers), 2):
        common = sorted(set(answers[a]) & set(answers[b]))
        if not common:
            continue
        first, second = [answers[a][i] for i in common], [answers[b][i] for i in common]
        labels = sorted(set(first) | set(second))
        pairs.append(PairAgreement(a, b, len(common), sum(x == y for x, y in zip(first, second)) / len(common),
                                   _kappa(first, second),
                                   {lab: _kappa([str(x == lab) for x in first], [str(y == lab) for y in second])
                                    for lab in labels}))
        for i, x, y in zip(common, first, second):
            if x != y:
                split.setdefault(i, {}).update({a: x, b: y})
    if not pairs:
        raise DataError(f"{', '.join(map(str, paths))}: no text was labelled by two labellers "
                        f"({', '.join(sorted(answers))}); give them an overlap")
    return AgreementReport({who: len(got) for who, got in sorted(answers.items())}, pairs,
                           [Disagreement(i, texts[i], labels) for i, labels in sorted(split.items())])
