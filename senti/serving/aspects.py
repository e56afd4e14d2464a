"""Aspect answers from any two-class senti model: which of a team's aspects each text mentions, and how.

A text is cut into units (sentences, or clauses: sentences cut again at commas); an aspect is mentioned in a unit
that holds one of its keywords; the model scores every mentioning unit once, and an aspect's answer is the mean
probability of the positive label over its units: `positive` above 0.5 + `neutral_margin`, `negative` below
0.5 - `neutral_margin`, `neutral` between, `not_mentioned` where no unit holds a keyword. The evidence is each
mentioning unit with its character offsets in the text and the keyword found. The aspect list is an argument of
every call, so a service changes it per request without reloading the model.

A model with aspect heads (`senti train --aspects`, its labels "aspect/polarity") scores the whole text instead:
each asked aspect (one it has a head for) is answered by its head, the keyword units still the evidence.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from senti.core import layout
from senti.core.artifacts import remove_stale_work
from senti.core.aspects import ASPECT_POLARITIES, HEAD_SEPARATOR, Aspect, head_aspects
from senti.core.errors import SentiError

UNITS = ("sentence", "clause")
SENTENCE_END = re.compile(r"[。！？!?；;\n\r…~～]+")
CLAUSE_END = re.compile(r"[。！？!?；;\n\r…~～，,、]+")
POSITIVE_NAMES = ("positive", "pos", "1", "正面", "积极")
NEGATIVE_NAMES = ("negative", "neg", "0", "负面", "消极")
DEFAULT_NEUTRAL_MARGIN = 0.0


@dataclass
class Evidence:
    text: str
    start: int  # character offsets in the scored text, end exclusive
    end: int
    keyword: str

    def to_json(self) -> dict:
        return {"text": self.text, "start": self.start, "end": self.end, "keyword": self.keyword}


@dataclass
class AspectAnswer:
    polarity: str  # one of senti.core.aspects.ASPECT_POLARITIES
    # mean probability of the positive label over the evidence (aspect heads: the aspect's probability of positive);
    # None when not mentioned
    score: float | None = None
    evidence: list[Evidence] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"polarity": self.polarity, "score": self.score, "evidence": [e.to_json() for e in self.evidence]}


def units(text: str, unit: str = "sentence") -> list[tuple[int, int]]:
    """(start, end) of each non-blank sentence or clause of `text`."""
    check_unit(unit)
    spans, start = [], 0
    for m in (SENTENCE_END if unit == "sentence" else CLAUSE_END).finditer(text):
        spans.append((start, m.end()))
        start = m.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def mentions(text: str, aspects: list[Aspect], unit: str) -> dict[str, list[Evidence]]:
    """For each aspect, the units of `text` that hold one of its keywords (the first keyword found names it)."""
    pieces = []
    for a, b in units(text, unit):  # offsets of the unit without its surrounding blanks, as the evidence's text
        piece = text[a:b]
        start = a + len(piece) - len(piece.lstrip())
        pieces.append((piece.strip(), start))
    found: dict[str, list[Evidence]] = {}
    for aspect in aspects:
        for piece, start in pieces:
            keyword = next((k for k in aspect.keywords if k in piece), None)
            if keyword is not None:
                found.setdefault(aspect.name, []).append(Evidence(piece, start, start + len(piece), keyword))
    return found


def positive_index(labels: list[str]) -> int:
    """The position of the positive label of a two-class sentiment model; SentiError otherwise."""
    names = [str(label).strip().lower() for label in labels]
    pos = [i for i, n in enumerate(names) if n in POSITIVE_NAMES]
    neg = [i for i, n in enumerate(names) if n in NEGATIVE_NAMES]
    if len(labels) != 2 or len(pos) != 1 or len(neg) != 1:
        raise SentiError(f"aspect answers need a two-class positive/negative model; this one has labels {labels}")
    return pos[0]


def polarity(p_positive: float, neutral_margin: float) -> str:
    if p_positive > 0.5 + neutral_margin:
        return "positive"
    if p_positive < 0.5 - neutral_margin:
        return "negative"
    return "neutral"


def answer_aspects(predictor, texts: list[str], aspects: list[Aspect], unit: str = "sentence",
                   neutral_margin: float = DEFAULT_NEUTRAL_MARGIN) -> list[dict[str, AspectAnswer]]:
    """One {aspect name: AspectAnswer} per text, every aspect answered; `predictor` a senti.serving.Predictor (or
    anything with `labels` and `predict(texts)`): a two-class model scores the mentioning units, a model with aspect
    heads (`senti train --aspects`) the whole texts."""
    check_settings(predictor.labels, unit, neutral_margin, aspects)
    found, pieces = aspect_pieces(texts, aspects, unit, predictor.labels)
    scored = {piece: p.probabilities for piece, p in zip(pieces, predictor.predict(pieces))}
    return assemble_scored(texts, found, aspects, predictor.labels, scored, neutral_margin)


def assemble_scored(texts: list[str], found: list[dict[str, list[Evidence]]], aspects: list[Aspect],
                    labels: list[str], scored: dict[str, dict[str, float]], neutral_margin: float
                    ) -> list[dict[str, AspectAnswer]]:
    """The answers from each scored piece's probabilities (`scored`, by piece, as `aspect_pieces` listed them)."""
    if head_aspects(labels) is not None:
        return head_answers(texts, found, aspects, scored)
    positive = labels[positive_index(labels)]
    return assemble(found, aspects, {piece: p[positive] for piece, p in scored.items()}, neutral_margin)


def head_shares(probabilities: dict[str, float], name: str) -> dict[str, float]:
    """The four outputs of aspect `name`'s head (a model's probabilities by label) made to sum to one, by polarity."""
    share = {p: probabilities[f"{name}{HEAD_SEPARATOR}{p}"] for p in ASPECT_POLARITIES}
    total = sum(share.values()) or 1.0
    return {p: value / total for p, value in share.items()}


def head_answers(texts: list[str], found: list[dict[str, list[Evidence]]], aspects: list[Aspect],
                 scored: dict[str, dict[str, float]]) -> list[dict[str, AspectAnswer]]:
    """Aspect heads' answers: for each aspect, its four outputs' probabilities made to sum to one, the likeliest
    polarity answered, the probability of positive among them as the score; the keyword units as evidence where
    there are any (a head may find a mention the keywords miss, and answer it with no evidence)."""
    answers = []
    for text, per_text in zip(texts, found):
        row = {}
        for aspect in aspects:
            share = head_shares(scored[text], aspect.name)
            said = max(share, key=lambda p: share[p])
            score = None if said == "not_mentioned" else round(share["positive"], 6)
            row[aspect.name] = AspectAnswer(said, score, per_text.get(aspect.name, []) if score is not None else [])
        answers.append(row)
    return answers


def check_unit(unit: str) -> None:
    if unit not in UNITS:
        raise SentiError(f"unit must be one of {', '.join(UNITS)}; got {unit!r}")


def check_settings(labels: list[str], unit: str, neutral_margin: float, aspects: list[Aspect] | None = None) -> None:
    """An aspect request's settings, before anything is scored: the unit, the margin, and a two-class
    positive/negative model or one with aspect heads for every aspect asked (the `senti serve` route and a Ray job
    ask the same)."""
    check_unit(unit)
    check_margin(neutral_margin)
    heads = head_aspects(labels)
    if heads is None:
        positive_index(labels)
        return
    missing = [a.name for a in aspects or [] if a.name not in heads]
    if missing:
        named = ", ".join(heads[:10]) + (f" ({len(heads)} in all)" if len(heads) > 10 else "")
        raise SentiError(f"this model's aspect heads answer {named}; it has no head for {', '.join(missing[:5])}")


def check_margin(neutral_margin: float) -> None:
    if not 0.0 <= neutral_margin < 0.5:
        raise SentiError(f"neutral_margin must be in [0, 0.5); got {neutral_margin}")


def aspect_pieces(texts: list[str], aspects: list[Aspect], unit: str, labels: list[str] | None = None
                  ) -> tuple[list[dict[str, list[Evidence]]], list[str]]:
    """(each text's mentions, the distinct pieces to score): the mentioning units, a unit that mentions several
    aspects, or recurs in several texts, scored once; for a model with aspect heads (its `labels`), the texts."""
    found = [mentions(text, aspects, unit) for text in texts]
    if labels is not None and head_aspects(labels) is not None:
        return found, list(dict.fromkeys(texts))
    return found, sorted({e.text for per_text in found for ev in per_text.values() for e in ev})


def assemble(found: list[dict[str, list[Evidence]]], aspects: list[Aspect], scores: dict[str, float],
             neutral_margin: float) -> list[dict[str, AspectAnswer]]:
    """The answers, given each scored unit's probability of the positive label."""
    answers = []
    for per_text in found:
        row = {}
        for aspect in aspects:
            evidence = per_text.get(aspect.name, [])
            if not evidence:
                row[aspect.name] = AspectAnswer("not_mentioned")
                continue
            score = sum(scores[e.text] for e in evidence) / len(evidence)
            row[aspect.name] = AspectAnswer(polarity(score, neutral_margin), round(score, 6), evidence)
        answers.append(row)
    return answers


def answer_file(predictor, src: Path, dst: Path, aspects: list[Aspect], text_column: str | None = None,
                unit: str = "sentence", neutral_margin: float = DEFAULT_NEUTRAL_MARGIN, chunk_rows: int = 256) -> dict:
    """Every row of `src` (as senti predict reads it) written to `dst` (JSONL) with its `aspects` answers, or its
    `error`; written to a hidden partial file beside `dst` and renamed over it, as senti predict writes, so no
    reader sees half a file. Returns counts: rows, errors,
    and per aspect the answers of each polarity."""
    from senti.core.rows import read_rows

    counts = {"rows": 0, "errors": 0, "aspects": {a.name: dict.fromkeys(ASPECT_POLARITIES, 0) for a in aspects}}
    dst = Path(dst)
    remove_stale_work(dst.parent, dst.name, "partial")  # as senti predict's output: a killed run's leftovers go
    partial = dst.with_name(layout.work_prefix(dst.name, "partial") + "out")
    try:
        with partial.open("w", encoding="utf-8") as out:
            chunk: list = []
            for row in read_rows(Path(src), text_column):
                chunk.append(row)
                if len(chunk) >= chunk_rows:
                    _write_chunk(predictor, chunk, aspects, unit, neutral_margin, out, counts)
                    chunk = []
            _write_chunk(predictor, chunk, aspects, unit, neutral_margin, out, counts)
        os.replace(partial, dst)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return counts


def _write_chunk(predictor, rows: list, aspects: list[Aspect], unit: str, neutral_margin: float, out,
                 counts: dict) -> None:
    good = [r for r in rows if r.error is None and r.text is not None]
    answers = iter(answer_aspects(predictor, [r.text for r in good], aspects, unit, neutral_margin) if good else [])
    for row in rows:
        record = dict(row.record) if row.record else {"text": row.text}
        counts["rows"] += 1
        if row.error is not None or row.text is None:
            record = {"line": row.line, "error": row.error or "no text"}  # what senti predict writes for it
            counts["errors"] += 1
        else:
            answer = next(answers)
            record["aspects"] = {name: a.to_json() for name, a in answer.items()}
            for name, a in answer.items():
                counts["aspects"][name][a.polarity] += 1
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
