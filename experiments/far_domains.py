"""The surge loop on far domains: a ChnSentiCorp model meets each online_shopping domain.

    python -m experiments.far_domains --model CHECKPOINT --old ../shared/data/chnsenticorp \
        --domains fruit,shampoo,... [--root ../shared/data/online_shopping] [--budget 400] \
        [--strategies uncertainty,random] [--seeds 1,2,3] [--option NAME=VALUE ...] --output DIR

For each domain: the model before the loop, the char n-gram baseline fitted on --old and fitted in-domain, all
scored on the domain's dev and test splits (choices are made on dev; test is reported once).
Then for each strategy and seed: `senti select`'s pick of --budget texts from the
domain's training split (scored by the model), labelled with their gold labels (what the label page collects),
`senti train --model CHECKPOINT --dataset PICKS --replay OLD` with senti's defaults (plus any --option), scored on
both splits (with its figure on --old's dev split, as training recorded it); and the n-gram baseline refitted
on --old's training split plus the same picks (what a user would do in scikit-learn with the same labels).
With --unlabeled-arm, each run again with the domain's training texts as `--unlabeled`; with --arm NAME=VALUE
(repeatable), each run again with that option added (for example `--arm interpolate='"auto"'`), recorded under
the run's "arms". Writes DIR/report.json as it goes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np

from experiments.surge_loop import _write_tsv  # label<TAB>text_a, as ChnSentiCorp's files are
from senti.core import layout


def _option(text: str) -> tuple[str, object]:
    name, _, value = text.partition("=")
    return name, json.loads(value)


def _arm(text: str) -> tuple[str, dict]:
    """An arm: its name as given and its options, NAME=JSON pairs joined by ';' (`epochs=10;l2_sp=1`)."""
    options = dict(_option(part) for part in text.split(";"))
    return ";".join(f"{name}={value}" for name, value in options.items()), options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--old", required=True)
    parser.add_argument("--root", default="../shared/data/online_shopping")
    parser.add_argument("--domains", default="fruit,shampoo,clothes,tablets,phones,mengniu_dairy,water_heaters")
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument("--strategies", default="uncertainty,random")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--option", action="append", default=[], type=_option,
                        help="a TrainConfig field for the loop's senti train, NAME=JSON (repeatable)")
    parser.add_argument("--dev-random", type=int, default=0,
                        help="of the budget, this many random pool texts are labelled as the dev split (train.tsv and "
                             "dev.tsv in a folder) and the rest picked by the strategy; 0: one picks file, cut 80/10/10")
    parser.add_argument("--unlabeled-arm", action="store_true",
                        help="after each run, the same run again with the domain's training texts as --unlabeled "
                             "(self-training), recorded as the run's 'unlabeled' arm")
    parser.add_argument("--arm", action="append", default=[], type=_arm,
                        help="NAME=JSON[;NAME=JSON...]: after each run, the same run again with these options too "
                             "(repeatable)")
    parser.add_argument("--arms-only", action="store_true",
                        help="run only the --arm runs, not the defaults' (whose figures an earlier report holds)")
    parser.add_argument("--after", default="dev,test",
                        help="the splits each continued model is scored on (test alone halves the scoring)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", required=True)
    return parser


def baseline_accuracy(train_rows, rows, labels, weights: np.ndarray | None = None) -> float:
    """The n-gram baseline fitted on `train_rows` (each counting its `weights` entry, 1 when not given), its accuracy
    on `rows`."""
    from senti.toolkit.evaluation.baseline import baseline_probabilities, fit_baseline

    fitted = fit_baseline([e.text for e in train_rows], [e.label for e in train_rows], labels, weights=weights)
    predicted = baseline_probabilities(fitted, [e.text for e in rows], len(labels)).argmax(1)
    return float((predicted == np.array([labels.index(e.label) for e in rows])).mean())


def main(argv=None) -> dict:
    args = _parser().parse_args(argv)
    from senti.core.runtime import configure_runtime

    configure_runtime(args.threads)
    from senti.toolkit.logs import quiet_libraries

    quiet_libraries()
    from senti.core.checkpoint import load_checkpoint
    from senti.core.scores import softmax
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.evaluation.evaluate import predict_logits
    from senti.toolkit.surge.selection import pick
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    old = load_splits(args.old)
    report: dict = {"model": args.model, "old": args.old, "budget": args.budget,
                    "options": dict(args.option), "domains": {}}

    def accuracy(checkpoint, rows) -> tuple[float, np.ndarray]:
        model, tokenizer, meta = load_checkpoint(Path(checkpoint))
        logits = predict_logits(model, encode_texts(tokenizer, [e.text for e in rows], meta.max_seq_len)[0])
        gold = np.array([meta.labels.index(e.label) for e in rows])
        return float((logits.argmax(1) == gold).mean()), logits

    labels = load_checkpoint(Path(args.model))[2].labels
    for domain in args.domains.split(","):
        splits = load_splits(str(Path(args.root) / domain))
        scored = {name: splits.split(name) for name in ("dev", "test")}
        if set(args.strategies.split(",")) == {"random"}:  # random picks need no scores of the pool
            probs = np.full((len(splits.train), len(labels)), 1 / len(labels))
        else:
            probs = softmax(accuracy(args.model, splits.train)[1])
        entry: dict = {"texts": {k: len(v) for k, v in scored.items()}, "pool": len(splits.train),
                 "before": {k: accuracy(args.model, scored[k])[0] for k in args.after.split(",")},
                 "baseline_old": {k: baseline_accuracy(old.train, v, labels) for k, v in scored.items()},
                 "baseline_in_domain": {k: baseline_accuracy(splits.train, v, labels) for k, v in scored.items()},
                 "runs": []}
        print(json.dumps({"domain": domain, **{k: v for k, v in entry.items() if k != "runs"}}), flush=True)
        for strategy in args.strategies.split(","):
            for seed in [int(s) for s in args.seeds.split(",")]:
                picked = [splits.train[i] for i, _, _ in pick([e.text for e in splits.train], probs, labels,
                                                               args.budget - args.dev_random, strategy, seed=seed)]
                picks = out / f"{domain}-{strategy}-{seed}.tsv"
                _write_tsv(picks, picked)
                if args.dev_random:  # a representative dev split: random texts of the pool, labelled too
                    import random

                    chosen = {e.text for e in picked}
                    rest = [e for e in splits.train if e.text not in chosen]
                    dev = random.Random(seed).sample(rest, min(args.dev_random, len(rest)))
                    picks = out / f"{domain}-{strategy}-{seed}-data"
                    _write_tsv(picks / "train.tsv", picked)
                    _write_tsv(picks / "dev.tsv", dev)
                    picked = picked + dev
                ckpt = out / f"{domain}-{strategy}-{seed}"

                def continued(**options) -> dict:
                    started = time.perf_counter()
                    run_training(TrainConfig(model=args.model, dataset=str(picks), output_dir=str(ckpt),
                                             replay=args.old, seed=seed, device="cpu", overwrite=True,
                                             threads=args.threads, baseline=False, **dict(args.option), **options),
                                 say=lambda _: None)
                    metrics = json.loads((ckpt / layout.METRICS).read_text(encoding="utf-8"))
                    record = {"train_s": round(time.perf_counter() - started, 1),
                              "kept_parent": metrics.get("kept_parent", False),
                              "after": {k: accuracy(ckpt, scored[k])[0] for k in args.after.split(",")},
                              "old_dev": metrics["best"].get("old_dev_accuracy"),
                              "unlabeled": metrics["data"].get("unlabeled"), "blends": metrics.get("blends"),
                              "kept_blend": metrics["best"].get("blend")}
                    shutil.rmtree(ckpt)
                    return record

                run = {"strategy": strategy, "seed": seed, **({} if args.arms_only else continued()),
                       "baseline_refit": {k: baseline_accuracy(old.train + picked, v, labels)
                                          for k, v in scored.items()}}
                if args.unlabeled_arm:
                    pool = out / f"{domain}-pool.txt"
                    pool.write_text("\n".join(e.text for e in splits.train) + "\n", encoding="utf-8")
                    run["with_unlabeled"] = continued(unlabeled=str(pool))
                if args.arm:
                    run["arms"] = {name: continued(**options) for name, options in args.arm}
                entry["runs"].append(run)
                print(json.dumps({"domain": domain, **run}), flush=True)
                report["domains"][domain] = entry
                (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        report["domains"][domain] = entry
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
