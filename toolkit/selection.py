"""`senti select`: the unlabelled texts most worth labelling after a surge, from a deployed model's view.

Surges are full of repeated texts, and a model is most wrong where it is unsure. Strategies, by name:
`uncertainty` ranks by the margin between the two most probable labels (smallest first); `diverse` does
the same but skips a text too close to one already picked (character 3-gram Jaccard similarity); `random`
is the baseline. Exact duplicates (after trimming) are never picked twice, whatever the strategy.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np

from senti.core.errors import DataError
from senti.core.rows import read_rows
from senti.serving.predictor import softmax

NEAR_DUPLICATE = 0.5  # 3-gram Jaccard similarity at or above which `diverse` calls two texts the same
OUTPUT_SUFFIXES = (".jsonl", ".tsv", ".csv")


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
    first_of = {}
    for i, text in enumerate(texts):
        first_of.setdefault(text.strip(), i)
    candidates = sorted(first_of.values())  # one index per distinct text
    if strategy == "random":
        random.Random(seed).shuffle(candidates)
    else:
        candidates.sort(key=lambda i: (margins[i], i))
    picked, grams = [], []
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


def model_probabilities(model: Path, texts: list[str], batch_size: int = 64, trust_pickle: bool = False):
    """(probabilities, labels) from an export folder (its serving runtime) or a checkpoint (dynamic graph)."""
    from senti.core import layout

    if (Path(model) / layout.EXPORT_META).is_file():
        from senti.serving import Predictor

        predictor = Predictor.load(model)
        logits = predictor.logits(texts, batch_size)[0]
        labels = predictor.labels
    else:
        from senti.core.checkpoint import load_checkpoint
        from senti.toolkit.batching import encode_texts
        from senti.toolkit.evaluate import predict_logits

        net, tokenizer, meta = load_checkpoint(Path(model), trust_pickle)
        logits = predict_logits(net, encode_texts(tokenizer, texts, meta.max_seq_len)[0], batch_size)
        labels = meta.labels
    return softmax(logits), labels


def select_file(model: Path, src: Path, dst: Path, budget: int, strategy: str = "uncertainty", seed: int = 0,
                text_column: str | None = None, trust_pickle: bool = False, exclude: Path | None = None) -> dict:
    """Write the `budget` texts of `src` most worth labelling to `dst` (input columns, then the pool's line, the
    model's guess and its confidence, the margin score and the reason). `exclude`: a label log of `senti label`
    whose labelled texts are not picked again."""
    if strategy not in STRATEGIES:
        raise DataError(f"unknown strategy '{strategy}'; choose one of {', '.join(STRATEGIES)}")
    if budget < 1:
        raise DataError(f"budget must be at least 1; got {budget}")
    dst = Path(dst)
    if dst.suffix.lower() not in OUTPUT_SUFFIXES:
        raise DataError(f"--output {dst}: use {', '.join(OUTPUT_SUFFIXES)} (a .txt file cannot hold the scores)")
    rows = [r for r in read_rows(Path(src), text_column) if r.error is None and r.text and r.text.strip()]
    done = set()
    if exclude is not None:
        from senti.toolkit.labeling import labelled_texts

        done = labelled_texts(exclude)
    excluded = sum(r.text.strip() in done for r in rows)
    rows = [r for r in rows if r.text.strip() not in done]
    if not rows:
        raise DataError(f"{src}: no texts to choose from" + (f" ({excluded} already labelled)" if excluded else ""))
    probs, labels = model_probabilities(model, [r.text for r in rows], trust_pickle=trust_pickle)
    picked = pick([r.text for r in rows], probs, labels, budget, strategy, seed)
    _write(dst, [(rows[i], labels[int(probs[i].argmax())], float(probs[i].max()), score, reason)
                 for i, score, reason in picked])
    return {"read": len(rows) + excluded, "excluded_labelled": excluded, "distinct": len({r.text.strip() for r in rows}),
            "picked": len(picked), "strategy": strategy, "output": str(dst)}


def _write(dst: Path, picked) -> None:
    tmp = dst.with_name(f".{dst.name}.partial")
    columns = list(dict.fromkeys(k for row, *_ in picked for k in (row.record or {"text": row.text})))
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        if dst.suffix.lower() == ".jsonl":
            for row, guess, confidence, score, reason in picked:
                fh.write(json.dumps({**(row.record or {"text": row.text}), "line": row.line, "guess": guess,
                                     "confidence": confidence, "score": score, "reason": reason},
                                    ensure_ascii=False) + "\n")
        else:
            writer = csv.writer(fh, delimiter="\t" if dst.suffix.lower() == ".tsv" else ",", lineterminator="\n")
            writer.writerow([*columns, "line", "guess", "confidence", "score", "reason"])
            for row, guess, confidence, score, reason in picked:
                record = row.record or {"text": row.text}
                writer.writerow([*(str(record.get(c, "")).replace("\t", " ") for c in columns), row.line, guess,
                                 f"{confidence:.6f}", f"{score:.6f}", reason])
    tmp.replace(dst)
