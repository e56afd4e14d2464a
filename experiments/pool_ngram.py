"""The n-gram side refitted on a new shop's pool, labelled by the parent: does it lift a few-label continuation?

For each domain the parent scores its pool (the domain's training texts, unlabelled), dev and test once, as its two
sides (ERNIE's logits and the n-gram side's); the scores are cached in --output, with ChnSentiCorp's dev. For each
seed's picks (a far_domains run's `{domain}-random-{seed}-data/`, 32 + 32 gold labels), each --arm fits an n-gram
side over the head's own hashed n-grams on the old training split (gold), the pool's other texts as the parent
answers them (at `confidence` or above) and the picks' training labels: a logistic regression afresh, or with
`change=1` the parent's table plus a change drawn toward zero (what `senti train --ngram-init fit` does). It
replaces the parent's n-gram side beside the parent's ERNIE side (held); the weight between the sides is the
parent's, or the one with the lowest log-loss on the picks' dev labels. Quality on the domain's dev and test
splits and on the old dev, against the parent. No parent guard is applied.

    python -m experiments.pool_ngram --model tiny-chnsenticorp/ --old chnsenticorp/ --root shop/ \
        --picks runs/epochs32-tiny --arm confidence=0 --arm confidence=0.9 --arm change=1 --output runs/pool4-tiny
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

DOMAINS = "fruit,shampoo,clothes,tablets,phones,mengniu_dairy,water_heaters"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--old", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--picks", required=True, help="a far_domains output folder with the seeds' picks")
    parser.add_argument("--domains", default=DOMAINS)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--arm", type=_arm, action="append", default=[],
                        help="'name=value;...' of confidence, label_weight, pool_max, rounds, c, with_dev, cross_fit, "
                             "change (each optional)")
    parser.add_argument("--c", type=float, default=30.0, help="the logistic regression's C")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", required=True)
    return parser


def _scores(model, tokenizer, meta, texts: list[str], cache: Path):
    """(ERNIE's logits, the n-gram side's logits, the encoded ids) for texts, cached in `cache`."""
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.evaluation.evaluate import predict_logits

    encoded = encode_texts(tokenizer, texts, meta.max_seq_len)[0]
    if cache.exists():
        saved = np.load(cache)
        return saved["deep"], saved["wide"], encoded
    deep, wide = predict_logits(model, encoded, parts=True)
    np.savez(cache, deep=deep, wide=wide)
    return deep, wide, encoded


def _two_sided(fitted, x) -> np.ndarray:
    """A binary logistic regression's scores as the head's two logits (the table the head would hold for it)."""
    from senti.core.ngram_head import table_from_linear

    return np.asarray(x @ table_from_linear(fitted.coef_, 2))


def _arm(text: str) -> tuple[str, dict]:
    """'name=value;name=value' as (the text, its options)."""
    return text, {k: float(v) for k, v in (part.split("=", 1) for part in text.split(";") if part)}


def _read_tsv(path: Path, labels: list[str]) -> list[tuple[int, str]]:
    """(label index, text) rows of a picks file."""
    rows = [line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines()[1:] if line]
    return [(labels.index(label), text) for label, text in rows]


def main(argv=None) -> dict:
    args = _parser().parse_args(argv)
    from senti.core.runtime import configure_runtime

    configure_runtime(args.threads)
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    from senti.core.checkpoint import load_checkpoint
    from senti.core.ngram_head import combine_numpy, likeliest_weight, ngram_features
    from senti.core.scores import softmax
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.training.ngram_fit import fit_change

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer, meta = load_checkpoint(Path(args.model))
    config = model.config
    weight = float(config.ngram_weight)
    labels = meta.labels

    def features(encoded):
        return ngram_features(encoded, config.vocab_size, config.ngram_buckets)

    old = load_splits(args.old)
    old_x = features(encode_texts(tokenizer, [e.text for e in old.train], meta.max_seq_len)[0])
    old_y = np.array([labels.index(e.label) for e in old.train])
    old_offset = old_x @ model.ngram_table.weight.numpy().astype(np.float64)  # the parent's n-gram logits
    old_dev = _scores(model, tokenizer, meta, [e.text for e in old.dev], out / "old-dev.npz")
    report: dict = {"model": args.model, "parent_weight": weight, "domains": {}}
    for domain in args.domains.split(","):
        splits = load_splits(str(Path(args.root) / domain))
        parts = {name: _scores(model, tokenizer, meta, [e.text for e in rows], out / f"{domain}-{name}.npz")
                 for name, rows in (("pool", splits.train), ("dev", splits.dev), ("test", splits.test))}
        parts["old_dev"] = old_dev
        gold = {name: np.array([labels.index(e.label) for e in rows])
                for name, rows in (("dev", splits.dev), ("test", splits.test), ("old_dev", old.dev))}
        parent = {name: float((combine_numpy(parts[name][0], parts[name][1], weight).argmax(1) == gold[name]).mean())
                  for name in gold}
        pool_probs = softmax(combine_numpy(parts["pool"][0], parts["pool"][1], weight))
        pool_x = features(parts["pool"][2])
        index = {e.text: i for i, e in enumerate(splits.train)}
        entry: dict = {"parent": parent, "runs": []}
        for seed in [int(s) for s in args.seeds.split(",")]:
            data = Path(args.picks) / f"{domain}-random-{seed}-data"
            few_train, few_dev = _read_tsv(data / "train.tsv", labels), _read_tsv(data / "dev.tsv", labels)
            train_i = [index[t] for _, t in few_train]
            dev_i = np.array([index[t] for _, t in few_dev])
            dev_y = np.array([y for y, _ in few_dev])
            run: dict = {"seed": seed, "arms": {}}
            for name, arm in args.arm:
                pool = np.flatnonzero(pool_probs.max(1) >= arm.get("confidence", 0.0))
                pool = np.setdiff1d(pool, np.concatenate([dev_i, train_i]))  # the picks are not pool texts
                if arm.get("pool_max"):
                    pool = np.sort(np.random.default_rng(seed).permutation(pool)[:int(arm["pool_max"])])
                pool_y = pool_probs[pool].argmax(1)
                train_y = np.array([yy for yy, _ in few_train])

                def fit(rows, rows_y, arm=arm, pool=pool, pool_y=pool_y):
                    """The n-gram side fitted on the old split, the pool as labelled, and these picks: a function
                    of (features, the parent's n-gram logits) giving the new side's logits."""
                    for _ in range(int(arm.get("rounds", 1))):
                        x = sparse.vstack([old_x, pool_x[pool], pool_x[rows]]).tocsr()
                        y = np.concatenate([old_y, pool_y, rows_y])
                        if arm.get("change"):  # the parent's table plus a change drawn toward zero
                            offset = np.concatenate([old_offset, parts["pool"][1][pool], parts["pool"][1][rows]])
                            change = fit_change(x, y, offset, float(arm.get("c", args.c)))

                            def side(xx, parent_wide, change=change):
                                return parent_wide + xx @ change
                        else:
                            w = np.concatenate([np.ones(len(old_y) + len(pool)),
                                                np.full(len(rows), float(arm.get("label_weight", 1.0)))])
                            fitted = LogisticRegression(C=float(arm.get("c", args.c)), fit_intercept=False,
                                                        max_iter=2000).fit(x, y, sample_weight=w)

                            def side(xx, parent_wide, fitted=fitted):
                                return _two_sided(fitted, xx)
                        # a next round: the pool labelled again by the parent's ERNIE side and the new n-grams
                        pool_y = combine_numpy(parts["pool"][0][pool], side(pool_x[pool], parts["pool"][1][pool]),
                                               weight).argmax(1)
                    return side

                result: dict = {"pool_rows": int(len(pool))}
                if arm.get("cross_fit"):  # all picks train; the weight is chosen on their out-of-fold answers
                    rows, rows_y = np.concatenate([train_i, dev_i]), np.concatenate([train_y, dev_y])
                    folds = np.random.default_rng(seed).permutation(len(rows)) % int(arm["cross_fit"])
                    oof = np.zeros((len(rows), 2))
                    for k in range(int(arm["cross_fit"])):
                        held = rows[folds == k]
                        oof[folds == k] = fit(rows[folds != k], rows_y[folds != k])(pool_x[held],
                                                                                     parts["pool"][1][held])
                    chosen = likeliest_weight(parts["pool"][0][rows], oof, rows_y)[0]
                    child_oof = combine_numpy(parts["pool"][0][rows], oof, chosen).argmax(1)
                    parent_own = combine_numpy(parts["pool"][0][rows], parts["pool"][1][rows], weight).argmax(1)
                    result["picks"] = {"child_oof": float((child_oof == rows_y).mean()),
                                       "parent": float((parent_own == rows_y).mean())}
                    side = fit(rows, rows_y)
                elif arm.get("with_dev"):  # the dev picks train the table too (then only the parent's weight is fair)
                    side = fit(np.concatenate([train_i, dev_i]), np.concatenate([train_y, dev_y]))
                    chosen = weight
                else:
                    side = fit(np.asarray(train_i), train_y)
                    chosen = likeliest_weight(parts["pool"][0][dev_i], side(pool_x[dev_i], parts["pool"][1][dev_i]),
                                              dev_y)[0]
                new_wide = {k: side(features(parts[k][2]), parts[k][1]) for k in gold}
                result["chosen_weight"] = chosen
                for tag, wt in (("parent_weight", weight), ("chosen", chosen)):
                    result[tag] = {k: float((combine_numpy(parts[k][0], new_wide[k], wt).argmax(1)
                                             == gold[k]).mean()) for k in gold}
                run["arms"][name] = result
            entry["runs"].append(run)
            print(json.dumps({"domain": domain, "parent": parent, **run}), flush=True)
        report["domains"][domain] = entry
        (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
