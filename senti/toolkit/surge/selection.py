"""`senti select`: the unlabelled texts most worth labelling after a surge, from a deployed model's view.

Surges are full of repeated texts, and a model is most wrong where it is unsure. Strategies, by name:
`uncertainty` ranks by the margin between the two most probable labels (smallest first); `diverse` does
the same but skips a text too close to one already picked (character 3-gram Jaccard similarity); `random`
is the baseline. Exact duplicates (after trimming) are never picked twice, whatever the strategy.

With a team's aspect list (`Selection.aspects`), a text's margin is its least sure aspect's: each aspect it
mentions is answered as `senti aspects` answers it (senti.serving.aspects), and texts that mention none are left
out (counted). The reason names the aspect and the unit that holds it.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from senti.core.aspects import ASPECT_POLARITIES, Aspect, head_aspects
from senti.core.calibration import calibrated_probabilities
from senti.core.errors import DataError
from senti.core.rows import read_rows
from senti.serving.streaming import check_output, senti_names

NEAR_DUPLICATE = 0.5  # 3-gram Jaccard similarity at or above which `diverse` calls two texts the same


def _grams(text: str, n: int = 3) -> set[str]:
    text = "".join(text.split())
    return {text[i : i + n] for i in range(max(1, len(text) - n + 1))}


def _margin(probs: np.ndarray) -> np.ndarray:
    top = np.sort(probs, axis=1)
    return top[:, -1] - top[:, -2]


def pick(texts: list[str], probs: np.ndarray, labels: list[str], budget: int, strategy: str,
         seed: int = 0) -> list[tuple[int, float, str]]:
    """(index, score, reason) of the picked texts, best first; score is the margin (lower: less sure)."""
    margins = _margin(probs)
    first_of: dict[str, int] = {}
    for i, text in enumerate(texts):
        first_of.setdefault(text.strip(), i)
    candidates = sorted(first_of.values())  # one index per distinct text
    if strategy == "random":
        random.Random(seed).shuffle(candidates)
    else:
        candidates.sort(key=lambda i: (margins[i], i))
    picked: list[tuple[int, float, str]] = []
    grams: list[set] = []
    for i in candidates:
        if len(picked) >= budget:
            break
        top2 = np.argsort(probs[i])[-2:][::-1]
        sure = f"margin {margins[i]:.3f} between {labels[top2[0]]} and {labels[top2[1]]}"
        if strategy == "diverse":
            g = _grams(texts[i])
            if any(len(g & other) / len(g | other) >= NEAR_DUPLICATE for other in grams):
                continue
            grams.append(g)
            reason = f"{sure}; no near-duplicate among the picks"
        elif strategy == "random":
            reason = f"random sample (baseline); {sure}"
        else:
            reason = sure
        picked.append((i, float(margins[i]), reason))
    return picked


STRATEGIES = ("uncertainty", "diverse", "random")


def load_scorer(model: Path, trust_pickle: bool = False):
    """(texts -> probabilities, labels, version) from an export folder (its serving runtime; the version answers
    carry) or a checkpoint (dynamic graph; its folder's name), loaded once; the probabilities calibrated as the
    model's metadata says, as every runtime answers them."""
    from senti.core import layout

    if (Path(model) / layout.EXPORT_META).is_file():
        from senti.serving import Predictor

        predictor = Predictor.load(model)
        return (lambda texts: predictor.probabilities(predictor.logits(texts, 64)[0])), predictor.labels, \
            predictor.version
    from senti.core.checkpoint import load_checkpoint
    from senti.serving.tokenizer import FastTokenizer
    from senti.toolkit.evaluation.evaluate import predict_logits

    net, _, meta = load_checkpoint(Path(model), trust_pickle)
    # The serving tokenizer (the same ids as the checkpoint's, as every export's parity check proves) reads only
    # the head of a long text: a pool's 1 MB line costs what the model reads, not 10 s of PaddleNLP's tokenizer.
    fast = FastTokenizer.from_settings(Path(model), meta.tokenizer)

    def score(texts):
        return calibrated_probabilities(predict_logits(net, fast(texts, meta.max_seq_len), 64), meta.calibration)

    return score, meta.labels, f"checkpoint {Path(model).resolve().name}"


CHUNK = 2048  # texts scored per call: memory stays flat however long the pool
SENTI_COLUMNS = ("line", "guess", "confidence", "score", "reason")
LABELS_KEY = "labels"  # JSONL picks also carry the model's label names, for senti label


class _Pool:
    """The candidates a strategy can still pick, bounded: the `size` least sure distinct texts (or, for `random`,
    a seeded reservoir sample of rows), each with its row and probabilities."""

    def __init__(self, size: int, strategy: str, seed: int):
        import heapq

        self.heapq, self.size, self.strategy = heapq, size, strategy
        self.rng = random.Random(seed)
        self.heap: list = []  # uncertainty/diverse: (-margin, -order, text); random: a reservoir list
        self.kept: dict[str, tuple] = {}  # text -> (order, row, probs)
        self.seen = 0

    def add(self, order: int, row, probs: np.ndarray) -> None:
        text = row.text.strip()
        if text in self.kept:  # a later duplicate: the first occurrence is the one that can be picked
            return
        self.seen += 1
        if self.strategy == "random":  # reservoir sampling (Algorithm R) over the rows seen
            if len(self.heap) < self.size:
                self.heap.append(text)
            else:
                slot = self.rng.randrange(self.seen)
                if slot >= self.size:
                    return
                del self.kept[self.heap[slot]]
                self.heap[slot] = text
            self.kept[text] = (order, row, probs)
            return
        margin = float(_margin(probs[None])[0])
        entry = (-margin, -order, text)
        if len(self.heap) < self.size:
            self.heapq.heappush(self.heap, entry)
        elif entry > self.heap[0]:  # less sure than the surest kept: it takes that one's place
            _, _, dropped = self.heapq.heapreplace(self.heap, entry)
            del self.kept[dropped]
        else:
            return
        self.kept[text] = (order, row, probs)

    def candidates(self):
        return sorted(self.kept.values(), key=lambda kept: kept[0])


@dataclass
class Selection:
    """How many texts to pick and how: `strategy` (STRATEGIES), its `seed`, `exclude`, a label log of `senti
    label` whose labelled texts are not picked again, and `aspects`, a team's aspect list: a text's margin is then
    its least sure mentioned aspect's (answered by `unit`, as `senti aspects` answers)."""

    budget: int
    strategy: str = "uncertainty"
    seed: int = 0
    exclude: Path | None = None
    aspects: list[Aspect] | None = None
    unit: str = "sentence"


class AspectScorer:
    """texts -> each text's least sure aspect, as two-class probabilities (NaN where a text mentions no aspect),
    from a scorer of whole texts: every mentioning unit is scored once, an aspect's probability of the positive
    label is the mean over its units (senti.serving.aspects.assemble)."""

    def __init__(self, score, labels: list[str], aspects: list[Aspect], unit: str):
        from senti.serving.aspects import check_settings, positive_index

        check_settings(labels, unit, 0.0)
        self.score, self.aspects, self.unit = score, aspects, unit
        self.positive = positive_index(labels)

    def least_sure(self, texts: list[str]) -> list[tuple[str, float, str] | None]:
        """(aspect name, probability of the positive label, its first unit) per text; None: no aspect mentioned."""
        from senti.serving.aspects import aspect_pieces, assemble

        found, pieces = aspect_pieces(texts, self.aspects, self.unit)
        scores = dict(zip(pieces, self.score(pieces)[:, self.positive].tolist())) if pieces else {}
        out: list[tuple[str, float, str] | None] = []
        for answers in assemble(found, self.aspects, scores, 0.0):
            said = [(name, a.score, a.evidence[0].text) for name, a in answers.items() if a.score is not None]
            out.append(min(said, key=lambda s: abs(s[1] - 0.5)) if said else None)
        return out

    def __call__(self, texts: list[str]) -> np.ndarray:
        probs = np.full((len(texts), 2), np.nan)
        for i, said in enumerate(self.least_sure(texts)):
            if said is not None:
                probs[i, self.positive], probs[i, 1 - self.positive] = said[1], 1 - said[1]
        return probs

    def reasons(self, texts: list[str]) -> list[str]:
        return [f"aspect {name}: margin {abs(2 * p - 1):.3f} on \"{unit[:60]}\"" for name, p, unit in
                (said or ("-", 0.5, "") for said in self.least_sure(texts))]


class HeadScorer:
    """texts -> the four answers' probabilities (ASPECT_POLARITIES) of each text's least sure aspect, for a model
    with aspect heads (`senti train --aspects`): every asked aspect is answered from the whole text, and the least
    sure is the one whose two likeliest answers are closest."""

    def __init__(self, score, labels: list[str], aspects: list[Aspect]):
        from senti.serving.aspects import check_settings

        check_settings(labels, "sentence", 0.0, aspects)
        self.score, self.labels, self.aspects = score, labels, aspects

    def least_sure(self, texts: list[str]) -> list[tuple[str, np.ndarray]]:
        """(aspect name, its four answers' probabilities) per text."""
        from senti.serving.aspects import head_shares

        out = []
        for row in self.score(texts):
            probabilities = dict(zip(self.labels, row.tolist()))
            shares = np.array([list(head_shares(probabilities, a.name).values()) for a in self.aspects])
            least = int(_margin(shares).argmin())
            out.append((self.aspects[least].name, shares[least]))
        return out

    def __call__(self, texts: list[str]) -> np.ndarray:
        return np.stack([shares for _, shares in self.least_sure(texts)])

    def reasons(self, texts: list[str]) -> list[str]:
        return [f"aspect {name}: margin {float(_margin(shares[None])[0]):.3f}" for name, shares in
                self.least_sure(texts)]


class _PoolReader:
    """The pool's rows scored in chunks into the kept candidates; what was read, left out and why."""

    def __init__(self, score, pool, done: set):
        self.score, self.pool, self.done = score, pool, done
        self.counts = {"read": 0, "unreadable": 0, "empty": 0, "excluded_labelled": 0, "no_aspect": 0}
        self.bad_lines: list[int] = []
        self.first_error = ""
        self.chunk: list = []

    def flush(self) -> None:
        if self.chunk:
            for (order, row), probs in zip(self.chunk, self.score([r.text for _, r in self.chunk])):
                if np.isnan(probs).any():  # an aspect selection: the text mentions none of the aspects
                    self.counts["no_aspect"] += 1
                else:
                    self.pool.add(order, row, probs)
            self.chunk.clear()

    def add(self, row) -> None:
        self.counts["read"] += 1
        if row.error is not None and row.error != "empty line":
            self.counts["unreadable"] += 1
            self.first_error = self.first_error or row.error
            if len(self.bad_lines) < 10:
                self.bad_lines.append(row.line)
        elif row.error is not None or not row.text or not row.text.strip():
            self.counts["empty"] += 1
        elif row.text.strip() in self.done:
            self.counts["excluded_labelled"] += 1
        else:
            self.chunk.append((self.counts["read"], row))
            if len(self.chunk) >= CHUNK:
                self.flush()

    def nothing_to_pick(self, src: Path) -> DataError:
        why = [f"{self.counts['excluded_labelled']} already labelled"] if self.counts["excluded_labelled"] else []
        if self.counts["no_aspect"]:
            why.append(f"{self.counts['no_aspect']} mention none of the aspects")
        if self.bad_lines:  # the first unreadable line, by its number in the file, and what was wrong with it
            why.append(f"{self.counts['unreadable']} unreadable, from line {self.bad_lines[0]}: {self.first_error}")
        return DataError(f"{src}: no texts to choose from" + (f" ({'; '.join(why)})" if why else ""))


def select_file(model: Path, src: Path, dst: Path, selection: Selection, text_column: str | None = None,
                trust_pickle: bool = False) -> dict:
    """Write the `selection.budget` texts of `src` most worth labelling to `dst`: every input column, then senti's
    (the pool's line, the model's guess and its confidence, the margin score and the reason; a name the input
    already uses gets a `senti_` prefix). The pool is read and scored in chunks and only a bounded set of candidates
    is kept."""
    budget, strategy, seed = selection.budget, selection.strategy, selection.seed
    if strategy not in STRATEGIES:
        raise DataError(f"unknown strategy '{strategy}'; choose one of {', '.join(STRATEGIES)}")
    if budget < 1:
        raise DataError(f"budget must be at least 1; got {budget}")
    check_output(src, dst)
    dst = Path(dst)
    next(iter(read_rows(Path(src), text_column)), None)  # an unreadable file or header fails before the model loads
    done = set()
    if selection.exclude is not None:
        from senti.toolkit.data.label_log import labelled_texts

        done = labelled_texts(selection.exclude)
    score, labels, _ = load_scorer(model, trust_pickle)
    if selection.aspects is not None and head_aspects(labels) is not None:  # the guess is the aspect's answer
        score, labels = HeadScorer(score, labels, selection.aspects), list(ASPECT_POLARITIES)
    elif selection.aspects is not None:
        score = AspectScorer(score, labels, selection.aspects, selection.unit)
    reader = _PoolReader(score, _Pool(max(20 * budget, 1000), strategy, seed), done)
    for row in read_rows(Path(src), text_column):
        reader.add(row)
    reader.flush()
    candidates = reader.pool.candidates()
    if not candidates:
        raise reader.nothing_to_pick(src)
    rows = [row for _, row, _ in candidates]
    probs = np.stack([p for _, _, p in candidates])
    picked = pick([r.text for r in rows], probs, labels, budget, strategy, seed)
    if isinstance(score, (AspectScorer, HeadScorer)):  # the reason names the least sure aspect (and its unit)
        said = score.reasons([rows[i].text for i, _, _ in picked])
        picked = [(i, margin, "; ".join(aspect if part.startswith("margin ") else part for part in reason.split("; ")))
                  for (i, margin, reason), aspect in zip(picked, said)]
    _write(dst, [(rows[i], labels[int(probs[i].argmax())], float(probs[i].max()), margin, reason)
                 for i, margin, reason in picked], labels)
    return {**reader.counts, "unreadable_lines": reader.bad_lines, "candidates_kept": len(candidates),
            "picked": len(picked), "strategy": strategy, "output": str(dst)}


def _senti_names(records) -> dict[str, str]:
    """senti's column names for these picks: prefixed where any of the input's records uses the name."""
    return senti_names({k for record in records for k in record}, (*SENTI_COLUMNS, LABELS_KEY))


def _write(dst: Path, picked, labels: list[str]) -> None:
    tmp = dst.with_name(f".{dst.name}.partial")
    records = [row.record or {"text": row.text} for row, *_ in picked]
    columns = list(dict.fromkeys(k for record in records for k in record))
    named = _senti_names(records)
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        if dst.suffix.lower() == ".jsonl":
            for record, (row, guess, confidence, score, reason) in zip(records, picked):
                ours = {named["line"]: row.line, named["guess"]: guess, named["confidence"]: confidence,
                        named["score"]: score, named["reason"]: reason, named[LABELS_KEY]: labels}
                fh.write(json.dumps({**record, **ours}, ensure_ascii=False) + "\n")
        else:
            writer = csv.writer(fh, delimiter="\t" if dst.suffix.lower() == ".tsv" else ",", lineterminator="\n")
            writer.writerow([*columns, *(named[c] for c in SENTI_COLUMNS)])
            for record, (row, guess, confidence, score, reason) in zip(records, picked):
                writer.writerow([*(str(record.get(c, "")).replace("\t", " ") for c in columns), row.line, guess,
                                 f"{confidence:.6f}", f"{score:.6f}", reason])
    tmp.replace(dst)
