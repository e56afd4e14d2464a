"""Aspect heads over a shared encoder, learned from ASAP's train samples: does a head per aspect beat the team's
keywords plus the sentence model (docs/results/aspects.md)?

A senti checkpoint's encoder (fine-tuned on ChnSentiCorp) gains one linear layer of 18 x 4 outputs over its pooled
output: for each aspect positive / neutral / negative / not mentioned, one cross-entropy per aspect, trained on the
100 train reviews (the encoder with it, or held with `--freeze`), answered on the dev reviews three ways:
`heads` (each aspect's argmax), `keywords + heads` (the team's keywords say mentioned, the heads' polarity among
the three), `keywords or heads` (mentioned when either says so; the heads' polarity).

    python -m experiments.asap_heads --data asap-sample/ --model runs/e5 --seeds 0,1,2 [--freeze]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from experiments.asap_aspects import read_asap, scores

CLASSES = ["positive", "neutral", "negative", "not_mentioned"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--model", required=True, help="a senti checkpoint")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=5e-5, help="the encoder's; the head learns at 20x")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-seq-len", type=int, default=256)
    parser.add_argument("--freeze", action="store_true", help="train the head only")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default=None)
    return parser


def train_heads(encoder, ids, gold: np.ndarray, args, seed: int, pad_id: int):
    """The head (and the encoder unless --freeze) trained on `ids` (encoded reviews) and `gold` [reviews, aspects]."""
    import paddle
    import paddle.nn.functional as F

    from senti.core.batching import pad_batch

    paddle.seed(seed)
    head = paddle.nn.Linear(encoder.config.hidden_size, gold.shape[1] * len(CLASSES))
    params: list = [{"params": head.parameters(), "learning_rate": 20.0}]
    if not args.freeze:
        params.append({"params": encoder.parameters()})
    optimizer = paddle.optimizer.AdamW(learning_rate=args.lr, parameters=params, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    encoder.train() if not args.freeze else encoder.eval()
    for _ in range(args.epochs):
        order = rng.permutation(len(ids))
        for start in range(0, len(order), args.batch_size):
            index = order[start:start + args.batch_size]
            input_ids, types = (paddle.to_tensor(a) for a in pad_batch(ids, index, pad_id))
            pooled = encoder(input_ids, token_type_ids=types)[1]
            logits = head(pooled).reshape([-1, len(CLASSES)])
            loss = F.cross_entropy(logits, paddle.to_tensor(gold[index].reshape(-1)))
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
    return head


def head_logits(encoder, head, ids, aspects: int, pad_id: int) -> np.ndarray:
    import paddle

    from senti.core.batching import pad_batch

    encoder.eval()
    out = []
    with paddle.no_grad():
        for start in range(0, len(ids), 16):
            input_ids, types = (paddle.to_tensor(a) for a in pad_batch(ids, range(start, min(start + 16, len(ids))),
                                                                     pad_id))
            out.append(head(encoder(input_ids, token_type_ids=types)[1]).numpy().reshape(-1, aspects, len(CLASSES)))
    return np.concatenate(out)


def answers(logits: np.ndarray, rows, aspects) -> dict[str, list[dict]]:
    """The three ways of answering from the heads' logits [reviews, aspects, 4]."""
    said: dict[str, list[dict]] = {"heads": [], "keywords + heads": [], "keywords or heads": []}
    for row, per in zip(rows, logits):
        heads, kw, either = {}, {}, {}
        for a, scored in zip(aspects, per):
            polarity = CLASSES[int(scored[:3].argmax())]
            keyword = any(k in row["text"] for k in a.keywords)
            heads[a.name] = CLASSES[int(scored.argmax())]
            kw[a.name] = polarity if keyword else "not_mentioned"
            either[a.name] = polarity if keyword or heads[a.name] != "not_mentioned" else "not_mentioned"
        for name, value in zip(said, (heads, kw, either)):
            said[name].append(value)
    return said


def main(argv=None) -> dict:
    args = _parser().parse_args(argv)
    from senti.core.runtime import configure_runtime

    configure_runtime(args.threads)
    from senti.core.aspects import read_aspects
    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.data.batching import encode_texts

    data = Path(args.data)
    aspects = read_aspects(data / "aspects.json")
    names = [a.name for a in aspects]
    train, dev = read_asap(data / "train.csv", names), read_asap(data / "dev.csv", names)
    gold = np.array([[CLASSES.index(r["gold"][n]) for n in names] for r in train], dtype=np.int64)
    results: dict[str, list[dict]] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        model, tokenizer, _ = load_checkpoint(Path(args.model))
        pad_id = tokenizer.pad_token_id or 0
        train_ids = encode_texts(tokenizer, [r["text"] for r in train], args.max_seq_len)[0]
        dev_ids = encode_texts(tokenizer, [r["text"] for r in dev], args.max_seq_len)[0]
        head = train_heads(model.ernie, train_ids, gold, args, seed, pad_id)
        said = answers(head_logits(model.ernie, head, dev_ids, len(names), pad_id), dev, aspects)
        for name, answered in said.items():
            results.setdefault(name, []).append(scores(dev, answered, names))
            print(json.dumps({"seed": seed, "method": name, **results[name][-1]}), flush=True)
    print("| method (median of seeds) | 4-way accuracy | 4-way macro-F1 | mention F1 | polarity accuracy on found |")
    print("|---|---|---|---|---|")
    for name, runs in results.items():
        print(f"| {name} | " + " | ".join(f"{statistics.median(r[k] for r in runs):.3f}" for k in
                                           ("accuracy", "macro_f1", "mention_f1", "polarity_accuracy")) + " |")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
