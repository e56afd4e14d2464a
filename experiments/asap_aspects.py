"""Aspect answers on ASAP's samples (restaurant reviews, 18 aspects): the keyword rules and senti's aspect answers.

    python -m experiments.asap_aspects --data asap-sample/ --model EXPORT [--model EXPORT ...] [--split dev]
    python -m experiments.asap_aspects --data asap-sample/ --learned-mentions      (mention F1 only, no model)
    python -m experiments.asap_aspects --data asap-sample/ --similar-mentions e5-small/   (mention F1 only)
    python -m experiments.asap_aspects --data asap-sample/ --learning-curve 25,50,100 [--extra-train test_sample.csv]
        (the learned mention classifier's dev mention F1 as its training reviews grow: seeded subsets of train.csv,
        then train.csv plus --extra-train, more reviews in ASAP's layout such as its public test sample)

Methods: `rules`, a keyword in the review means mentioned and the star rating gives the polarity (4-5 positive,
3 neutral, 1-2 negative); `senti`, `senti.serving.aspects.answer_aspects` with each model, by sentence and by clause,
its neutral margin chosen on the train split (0 to 0.4 in steps of 0.05) and reported on --split; a model with aspect
heads (`senti train --aspects`) answered once, from its heads. Metrics over
(review, aspect) pairs: 4-way accuracy and macro-F1, mention F1 (mentioned or not), polarity accuracy on the pairs
both gold and answer call mentioned. Prints a markdown table and per-aspect rows; writes --output as JSON.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from senti.toolkit.data.aspect_units import ASAP_CODES as CODES  # the codes senti aspect-units reads

MARGINS = [round(0.05 * i, 2) for i in range(9)]


def read_asap(path: Path, names: list[str]) -> list[dict]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        return [{"text": r["reviewbody"], "star": float(r["star"]), "gold": {n: CODES[r[n].strip()] for n in names}}
                for r in csv.DictReader(fh)]


def rules(rows, aspects) -> list[dict]:
    def star(s: float) -> str:
        return "positive" if s >= 4 else "negative" if s <= 2 else "neutral"

    return [{a.name: (star(r["star"]) if any(k in r["text"] for k in a.keywords) else "not_mentioned")
             for a in aspects} for r in rows]


def scores(rows, answers, names) -> dict:
    from sklearn.metrics import f1_score

    gold = [r["gold"][n] for r in rows for n in names]
    said = [a[n] for a in answers for n in names]
    g_m = np.array([g != "not_mentioned" for g in gold])
    s_m = np.array([s != "not_mentioned" for s in said])
    both = g_m & s_m
    labels = ["positive", "neutral", "negative", "not_mentioned"]
    return {"accuracy": float(np.mean([g == s for g, s in zip(gold, said)])),
            "macro_f1": float(f1_score(gold, said, labels=labels, average="macro", zero_division=0)),
            "mention_f1": float(f1_score(g_m, s_m, zero_division=0)),
            "polarity_accuracy": float(np.mean([gold[i] == said[i] for i in np.flatnonzero(both)])) if both.any()
            else float("nan"), "found_mentions": int(both.sum()), "gold_mentions": int(g_m.sum())}


def senti_answers(predictor, rows, aspects, unit: str, margin: float) -> list[dict]:
    from senti.serving.aspects import answer_aspects

    out = answer_aspects(predictor, [r["text"] for r in rows], aspects, unit=unit, neutral_margin=margin)
    return [{name: a.polarity for name, a in row.items()} for row in out]


def learned_mentions(train, test, aspects, thresholds=(0.3, 0.5, 0.7)) -> dict:
    """Mention F1 on `test` of the team's keywords alone, of a mention classifier per aspect learned from the train
    reviews (character 1-3-gram TF-IDF, balanced logistic regression, C=10; review-level: the labels say whether a
    review mentions an aspect, not where), and of the keywords OR the classifier above each threshold."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True)
    x_train = vectorizer.fit_transform([r["text"] for r in train])
    x_test = vectorizer.transform([r["text"] for r in test])
    gold, keyword, learned = [], [], []
    for a in aspects:
        y = np.array([r["gold"][a.name] != "not_mentioned" for r in train])
        gold += [r["gold"][a.name] != "not_mentioned" for r in test]
        keyword += [any(k in r["text"] for k in a.keywords) for r in test]
        learned += list(LogisticRegression(C=10, max_iter=2000, class_weight="balanced").fit(x_train, y)
                        .predict_proba(x_test)[:, 1] if 0 < y.sum() < len(y) else np.full(len(test), y.mean()))
    found = {"keywords": keyword, "classifier alone (0.5)": [p > 0.5 for p in learned]}
    found.update({f"keywords or classifier > {t}": [k or p > t for k, p in zip(keyword, learned)] for t in thresholds})
    return {name: float(f1_score(gold, said)) for name, said in found.items()}


def learning_curve(train, extra, test, aspects, sizes: list[int], seeds=(0, 1, 2)) -> dict:
    """The mention classifier alone and OR the keywords (threshold 0.5) on `test`, learned from seeded subsets of
    `train` of each size (median of the seeds), then from `train` + `extra` when given."""
    import random
    import statistics

    curve = {}
    for size in sizes:
        runs = [learned_mentions(random.Random(seed).sample(train, min(size, len(train))), test, aspects, (0.5,))
                for seed in seeds] if size < len(train) else [learned_mentions(train, test, aspects, (0.5,))]
        curve[size] = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    if extra:
        curve[len(train) + len(extra)] = learned_mentions(train + extra, test, aspects, (0.5,))
    return curve


def sentence_embeddings(folder: Path, texts: list[str], prefix: str) -> np.ndarray:
    """Mean-pooled last hidden states, unit length, of a pretrained encoder folder (a Hugging Face one is converted
    as `senti train` converts it), each text read as `prefix + text` (e5's "query: " and "passage: ")."""
    import paddle

    from senti.core.batching import pad_batch
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.training.models import build_model

    model, tokenizer, _ = build_model(str(folder), ["negative", "positive"], [], 128)
    model.eval()
    ids = encode_texts(tokenizer, [prefix + t for t in texts], 128)[0]
    pad_id, out = tokenizer.pad_token_id or 0, []
    with paddle.no_grad():
        for start in range(0, len(ids), 32):
            input_ids, types = pad_batch(ids, range(start, min(start + 32, len(ids))), pad_id)
            states = model.ernie(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(types))[0].numpy()
            keep = (input_ids != pad_id)[..., None]
            out.append((states * keep).sum(1) / keep.sum(1))
    vectors = np.concatenate(out)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def similar_mentions(train, test, aspects, folder: Path) -> dict:
    """Mention F1 on `test` of the team's keywords, and of a sentence's similarity to each aspect's label and
    keywords (the encoder in `folder`, zero-shot; a review mentions the aspect when its most similar sentence is
    above a threshold chosen per aspect on the train reviews), alone and OR the keywords."""
    from sklearn.metrics import f1_score

    from senti.serving.aspects import units

    queries = sentence_embeddings(folder, [f"{a.label}：{'，'.join(a.keywords)}" for a in aspects], "query: ")

    def similarity(rows) -> np.ndarray:  # [reviews, aspects]: the most similar sentence's cosine
        pieces = [[r["text"][s:e] for s, e in units(r["text"], "sentence")] or [r["text"]] for r in rows]
        vectors = sentence_embeddings(folder, [p for per in pieces for p in per], "passage: ") @ queries.T
        ends = np.cumsum([len(per) for per in pieces])
        return np.stack([v.max(axis=0) for v in np.split(vectors, ends[:-1])])

    def truth(rows) -> tuple[np.ndarray, np.ndarray]:  # (gold mentions, keyword mentions), [reviews, aspects]
        return (np.array([[r["gold"][a.name] != "not_mentioned" for a in aspects] for r in rows]),
                np.array([[any(k in r["text"] for k in a.keywords) for a in aspects] for r in rows]))

    (gold_train, kw_train), (gold_test, kw_test) = truth(train), truth(test)
    sim_train, sim_test = similarity(train), similarity(test)
    grid = [*np.round(np.linspace(0.70, 0.95, 51), 3), 2.0]  # 2.0: never (cosines are at most 1)
    found = {"keywords": kw_test}
    for name, with_keywords in (("similarity alone", False), ("keywords or similarity", True)):
        said = np.zeros_like(gold_test)
        for j in range(len(aspects)):
            def guess(sim, kw, t):
                return (sim[:, j] > t) | (kw[:, j] & with_keywords)
            t = max(grid, key=lambda t: f1_score(gold_train[:, j], guess(sim_train, kw_train, t), zero_division=0))
            said[:, j] = guess(sim_test, kw_test, t)
        found[name] = said
    return {name: float(f1_score(gold_test.ravel(), said.ravel())) for name, said in found.items()}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--split", default="dev")
    parser.add_argument("--output", default=None)
    parser.add_argument("--learned-mentions", action="store_true")
    parser.add_argument("--similar-mentions", default=None, help="a pretrained encoder folder (e5-small)")
    parser.add_argument("--learning-curve", default=None, help="training review counts, comma-separated")
    parser.add_argument("--extra-train", default=None, help="more labelled reviews in ASAP's layout")
    args = parser.parse_args(argv)
    from senti.core.aspects import head_aspects, read_aspects
    from senti.core.runtime import configure_runtime

    configure_runtime(None)
    from senti.serving import Predictor

    data = Path(args.data)
    aspects = read_aspects(data / "aspects.json")
    names = [a.name for a in aspects]
    train, test = read_asap(data / "train.csv", names), read_asap(data / f"{args.split}.csv", names)
    if args.learning_curve:
        extra = read_asap(Path(args.extra_train), names) if args.extra_train else []
        curve = learning_curve(train, extra, test, aspects, [int(n) for n in args.learning_curve.split(",")])
        print("| training reviews | " + " | ".join(next(iter(curve.values()))) + " |")
        for size, found in curve.items():
            print(f"| {size} | " + " | ".join(f"{f1:.3f}" for f1 in found.values()) + " |")
        return curve
    if args.learned_mentions or args.similar_mentions:
        found = (similar_mentions(train, test, aspects, Path(args.similar_mentions)) if args.similar_mentions
                 else learned_mentions(train, test, aspects))
        for name, f1 in found.items():
            print(f"| {name} | {f1:.3f} |")
        return found
    said = {"rules": rules(test, aspects)}
    results = {"rules": scores(test, said["rules"], names)}
    for model in args.model:
        predictor = Predictor.load(model)
        if head_aspects(predictor.labels) is not None:  # aspect heads: no margin to choose, the unit only cuts evidence
            said[f"{Path(model).name} (heads)"] = answers = senti_answers(predictor, test, aspects, "sentence", 0.0)
            results[f"{Path(model).name} (heads)"] = scores(test, answers, names)
            continue
        for unit in ("sentence", "clause"):
            chosen = max(MARGINS, key=lambda m: scores(train, senti_answers(predictor, train, aspects, unit, m),
                                                       names)["macro_f1"])
            answers = senti_answers(predictor, test, aspects, unit, chosen)
            name = f"{Path(model).name} by {unit} (margin {chosen})"
            said[name], results[name] = answers, scores(test, answers, names)
    print("| method | 4-way accuracy | 4-way macro-F1 | mention F1 | polarity accuracy on found mentions |")
    print("|---|---|---|---|---|")
    for name, s in results.items():
        print(f"| {name} | {s['accuracy']:.3f} | {s['macro_f1']:.3f} | {s['mention_f1']:.3f} | "
              f"{s['polarity_accuracy']:.3f} ({s['found_mentions']} of {s['gold_mentions']}) |")
    print("\n| aspect | gold mentions | " + " | ".join(f"{m}: mention F1 / polarity accuracy" for m in said) + " |")
    print("|---|---|" + "---|" * len(said))
    for n in names:
        per = {m: scores(test, [{n: a[n]} for a in answers], [n]) for m, answers in said.items()}
        first = next(iter(per.values()))
        print(f"| {n} | {first['gold_mentions']} | " + " | ".join(
            f"{s['mention_f1']:.2f} / {s['polarity_accuracy']:.2f}" for s in per.values()) + " |")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
