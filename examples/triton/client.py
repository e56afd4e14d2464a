"""Calling the Triton repository of a senti export (`EXPORT/triton`) from a client, with the export's calibration.

    tritonserver --model-repository EXPORT/triton &
    python client.py EXPORT "这个产品非常好用" "服务态度极差"

Needs numpy, tokenizers and tritonclient[grpc]; not senti. `answers` turns the model's logits into what every
senti runtime answers: softmax(logits / temperature + bias) as export.json's `calibration` says (the plain softmax
when it has none), and `unsure` below its `abstain` threshold.
"""

import json
import sys
from pathlib import Path

import numpy as np


def answers(logits: np.ndarray, meta: dict) -> list[dict]:
    """label, score, probabilities and unsure per row of `logits` [texts, labels], as senti.serving answers."""
    calibration, abstain = meta.get("calibration"), meta.get("abstain")
    z = np.asarray(logits, dtype=np.float64)  # in float64, as senti.serving and the Node example compute it
    if calibration:
        z = z / calibration["temperature"] + np.asarray(calibration.get("bias") or 0.0)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    threshold = abstain["threshold"] if abstain else 0.0
    return [{"label": meta["labels"][int(row.argmax())], "score": float(row.max()),
             "probabilities": dict(zip(meta["labels"], map(float, row))), "unsure": bool(row.max() < threshold)}
            for row in p]


def main(export: str, texts: list[str], url: str = "localhost:8001") -> None:
    import tritonclient.grpc as grpcclient
    from tokenizers import Tokenizer

    meta = json.loads((Path(export) / "export.json").read_text(encoding="utf-8"))
    tok = Tokenizer.from_file(str(Path(export) / "tokenizer.json"))  # [CLS] text [SEP], cut to max_seq_len
    tok.enable_padding(pad_id=meta["tokenizer"]["pad_token_id"])  # a batch padded to its longest text
    ids = np.array([e.ids for e in tok.encode_batch(texts)], dtype=np.int64)
    inputs = [grpcclient.InferInput("input_ids", ids.shape, "INT64"),
              grpcclient.InferInput("token_type_ids", ids.shape, "INT64")]
    inputs[0].set_data_from_numpy(ids)
    inputs[1].set_data_from_numpy(np.zeros_like(ids))
    logits = grpcclient.InferenceServerClient(url).infer("senti", inputs).as_numpy("logits")  # [batch, labels]
    for text, answer in zip(texts, answers(logits, meta)):
        print(json.dumps({"text": text, **answer}, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
