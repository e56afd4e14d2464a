"""The peer a user would pick instead: PyTorch with Hugging Face transformers, same shape, same batches.

Optional (pip install 'senti[peer]'); without torch the suite records why it was skipped.
"""

from __future__ import annotations

import numpy as np

from benchmarks.timing import summarize, time_calls
from serving.batching import pad_batch
from toolkit.batching import length_bucketed_batches


def available() -> str | None:
    """None when torch and transformers import, else the reason they do not."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as err:
        return f"{err.name} is not installed (pip install 'senti[peer]')"
    return None


def _bert(vocab_size: int, layers: int, hidden: int, heads: int, ffn: int, labels: int):
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=ffn, num_labels=labels,
                        max_position_embeddings=512, attn_implementation="sdpa")
    return BertForSequenceClassification(config)


def bench_peer(encoded, labels: np.ndarray, shape: dict, heads: int, vocab_size: int, num_labels: int,
               batch_sizes, steps: int, warmup: int, threads: int, device: str = "cpu") -> list[dict]:
    """Training samples/s and inference latency of a BertForSequenceClassification of the same shape."""
    import torch

    torch.set_num_threads(threads)
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    lengths = [len(e) for e in encoded]
    records = []
    for batch in batch_sizes:
        model = _bert(vocab_size, shape["layers"], shape["hidden"], heads, shape["ffn"], num_labels).to(dev)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batches = length_bucketed_batches(lengths, batch, np.random.default_rng(0))
        feeds = []
        for index in batches[: warmup + steps]:
            ids, _ = pad_batch(encoded, index)
            feeds.append((torch.from_numpy(ids).to(dev), torch.from_numpy(labels[index]).to(dev)))
        i = iter(range(10**9))

        def train_step():
            ids, y = feeds[next(i) % len(feeds)]
            loss = model(input_ids=ids, attention_mask=(ids != 0).long(), labels=y).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            loss.item()

        model.train()
        step_s = time_calls(train_step, steps, warmup=warmup)
        records.append({"suite": "peer", "framework": f"torch {torch.__version__}", "task": "train",
                        "batch_size": batch, "step_ms": summarize(step_s),
                        "samples_per_s": batch / float(np.median(step_s)),
                        "seconds_per_epoch": len(encoded) / batch * float(np.median(step_s)),
                        "epoch_extrapolated": True})
        model.eval()
        ids, _ = feeds[0]

        def infer():
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=(ids != 0).long()).logits.cpu()

        infer_s = time_calls(infer, max(steps, 5), warmup=2)
        records.append({"suite": "peer", "framework": f"torch {torch.__version__}", "task": "infer",
                        "batch_size": batch, "latency_ms": summarize(infer_s),
                        "texts_per_s": len(ids) / float(np.median(infer_s))})
    return records
