"""Runs in the peer environment (torch + transformers, no senti): times the batches senti wrote."""

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification

# The worker runs as a script in the peer environment, where senti is not installed; these two helper
# modules need only numpy at import, so they are loaded from this folder by their bare names.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ceiling import best_seconds  # noqa: E402
from timing import summarize  # noqa: E402


def main(folder: Path) -> None:
    spec = json.loads((folder / "spec.json").read_text(encoding="utf-8"))
    data = np.load(folder / "batches.npz")
    torch.set_num_threads(spec["threads"])
    device = torch.device("cuda" if spec["device"] == "gpu" else "cpu")
    config = BertConfig(vocab_size=spec["vocab_size"], hidden_size=spec["hidden"], num_hidden_layers=spec["layers"],
                        num_attention_heads=spec["heads"], intermediate_size=spec["ffn"], num_labels=spec["labels"],
                        max_position_embeddings=512)
    feeds = [(torch.from_numpy(data[f"ids_{i}"]).to(device), torch.from_numpy(data[f"y_{i}"]).to(device))
             for i in range(spec["batches"])]
    framework = f"torch {torch.__version__}, transformers {__import__('transformers').__version__}"
    batch = len(feeds[0][1])
    out = []
    for precision in spec.get("precisions", ["fp32"]):
        model, times = train_times(config, feeds, spec, device, precision)
        step = float(np.median(times))
        out.append({"task": "train", "precision": precision, "framework": framework, "step_ms": summarize(times),
                    "samples_per_s": batch / step, "seconds_per_epoch": spec["train_rows"] / batch * step,
                    "epoch_extrapolated": True})
    out.append(mlm_step(config, feeds, spec, device, framework))
    model.eval()
    ids = feeds[0][0]
    latencies = []
    with torch.inference_mode():
        for i in range(spec["warmup"] + max(spec["steps"], 5)):
            t0 = time.perf_counter()
            model(input_ids=ids, attention_mask=(ids != 0).long()).logits.cpu()
            if i >= spec["warmup"]:
                latencies.append(time.perf_counter() - t0)
    out.append({"task": "infer", "framework": framework, "latency_ms": summarize(latencies),
                "texts_per_s": len(ids) / float(np.median(latencies))})
    for precision in spec.get("precisions", ["fp32"]):
        out.append({"task": "ceiling", "precision": precision, "framework": framework,
                    **matmul_ceiling(device, spec["ceiling_size"], precision)})
    (folder / "result.json").write_text(json.dumps(out), encoding="utf-8")


def _update(loss, optimizer) -> None:
    """Backward, the optimizer's step, and a wait for it (`item`), as senti's own step ends."""
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    loss.item()


def train_times(config, feeds, spec, device, precision: str):
    """A fresh classifier trained on `feeds`, fp32 or under autocast in bfloat16 (PyTorch's CPU AMP recipe);
    returns the model and the timed steps' seconds."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()
    times = []
    for i, (ids, y) in enumerate(feeds):
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(input_ids=ids, attention_mask=(ids != 0).long(), labels=y).loss
        _update(loss, optimizer)
        if i >= spec["warmup"]:
            times.append(time.perf_counter() - t0)
    return model, times


def mlm_step(config, feeds, spec, device, framework) -> dict:
    """A masked-LM training step as transformers runs it (the head at every position, labels -100 elsewhere)."""
    model = BertForMaskedLM(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(1)
    times, tokens = [], []
    for i, (ids, _) in enumerate(feeds):
        chosen = (torch.rand(ids.shape, generator=generator) < 0.15).to(device) & (ids > 3)
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        inputs = torch.where(chosen, torch.full_like(ids, 4), ids)
        t0 = time.perf_counter()
        loss = model(input_ids=inputs, attention_mask=(ids != 0).long(), labels=labels).loss
        _update(loss, optimizer)
        if i >= spec["warmup"]:
            times.append(time.perf_counter() - t0)
            tokens.append(ids.numel())
    step = float(np.median(times))
    return {"task": "pretrain", "framework": framework, "step_ms": summarize(times),
            "tokens_per_s": float(np.mean(tokens)) / step, "samples_per_s": len(feeds[0][0]) / step}


def matmul_ceiling(device, size: int, precision: str = "fp32") -> dict:
    """The [size, size] matmul in torch (fp32 or bf16), timed as senti times its own: the ceiling of this runtime."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))

    def call():
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()

    return {"size": size, "matmul_flops_per_s": 2.0 * size**3 / best_seconds(call)}


if __name__ == "__main__":
    main(Path(sys.argv[1]))
