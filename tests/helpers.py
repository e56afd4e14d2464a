"""Helpers the tests import: synthetic review corpora, a tiny model trained and exported, a real `senti serve` on
127.0.0.1, and texts that stress a tokenizer. Plain functions and constants; the fixtures are in conftest.py."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from senti.benchmarks import local_server
from senti.core import layout

ROOT = Path(__file__).resolve().parent.parent
CHNSENTICORP = ROOT.parent / "shared" / "data" / "chnsenticorp"


# Why a data-parallel test cannot keep every listener on loopback (the suite's guard, tests/conftest.py).
TCPSTORE = ("Paddle 3.3's TCPStore, opened by the rank-0 worker of a data-parallel run, binds every interface "
            "(no host setting)")


# Cue words per class: a tiny model learns these in a few dozen steps.
CUES = {
    "positive": ["非常好", "很满意", "推荐购买", "质量不错", "喜欢", "物超所值"],
    "negative": ["太差了", "很失望", "不推荐", "质量垃圾", "讨厌", "退货了"],
}
EMOTIONS = {
    "joy": ["开心", "高兴"], "anger": ["愤怒", "气死"], "sadness": ["难过", "伤心"],
    "fear": ["害怕", "恐惧"], "surprise": ["惊讶", "意外"], "disgust": ["恶心", "反感"],
}
FILLER = list("这个东西我们昨天买的店家快递包装外观颜色价格服务酒店房间电脑屏幕书本内容")


def synthetic_rows(n: int, classes: dict[str, list[str]] = CUES, seed: int = 0) -> list[tuple[str, str]]:
    """(label, text) rows: filler characters around one cue word of the label's class."""
    rng = random.Random(seed)
    labels = sorted(classes)
    rows = []
    for i in range(n):
        label = labels[i % len(labels)]
        left = "".join(rng.choices(FILLER, k=rng.randint(2, 12)))
        right = "".join(rng.choices(FILLER, k=rng.randint(2, 12)))
        rows.append((label, f"{left}{rng.choice(classes[label])}{right}"))
    rng.shuffle(rows)
    return rows


# Aspect cues: each aspect's clause for each polarity (not mentioned: no clause), for aspect heads to learn.
ASPECT_CUES = {
    "service": {"positive": "服务很热情", "neutral": "服务还行吧", "negative": "服务太差了"},
    "taste": {"positive": "味道好极了", "neutral": "味道一般般", "negative": "味道难吃死"},
}


def synthetic_aspect_rows(n: int, seed: int = 0) -> list[dict]:
    """JSONL rows {"text", "aspects": {name: polarity}}: filler around one clause per mentioned aspect."""
    rng = random.Random(seed)
    polarities = ["positive", "neutral", "negative", "not_mentioned"]
    rows = []
    for _ in range(n):
        said = {name: rng.choice(polarities) for name in ASPECT_CUES}
        clauses = ["".join(rng.choices(FILLER, k=rng.randint(2, 6)))]
        clauses += [ASPECT_CUES[name][p] for name, p in said.items() if p != "not_mentioned"]
        rng.shuffle(clauses)
        rows.append({"text": "，".join(clauses) + "。", "aspects": said})
    return rows


def write_aspect_data(folder: Path, n_train: int = 240, n_dev: int = 60) -> Path:
    """A folder of train.jsonl and dev.jsonl aspect rows, and aspects.json beside them (the list they label)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", n_train, 0), ("dev", n_dev, 1)):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                       for r in synthetic_aspect_rows(n, seed)), encoding="utf-8")
    aspects = [{"name": name, "keywords": [cues["positive"][:2]]} for name, cues in ASPECT_CUES.items()]
    (folder / "aspects.json").write_text(json.dumps({"aspects": aspects}, ensure_ascii=False), encoding="utf-8")
    return folder


def train_aspect_heads(root: Path):
    """(data folder, checkpoint, export, metrics): scratch:tiny with aspect heads on 240 synthetic texts
    (`write_aspect_data`), exported to Paddle Inference and ONNX; about 20 s."""
    from senti.export.pipeline import ExportConfig
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.exporting import export_checkpoint
    from senti.toolkit.training.train import run_training

    data = write_aspect_data(root / "data")
    # lr 2e-3: at the scratch default (5e-4) the tiny model stayed near the majority answer for 6 epochs
    config = TrainConfig(output_dir=str(root / "ckpt"), model="scratch:tiny", dataset=str(data),
                         aspects=str(data / "aspects.json"), epochs=12, lr=2e-3, seed=1, threads=2)
    metrics = run_training(config, say=lambda _: None)
    export_checkpoint(ExportConfig(model=str(root / "ckpt"), output_dir=str(root / "export"),
                                   formats=("paddle", "onnx")), say=lambda _: None)
    return data, root / "ckpt", root / "export", metrics


def write_rows(path: Path, rows, header=("label", "text_a")) -> Path:
    """Write (label, text) rows as .tsv, .csv or .jsonl by the file's suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for label, text in rows:
                fh.write(json.dumps({header[0]: label, header[1]: text}, ensure_ascii=False) + "\n")
    elif path.suffix == ".csv":
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)
    else:
        lines = ["\t".join(header)] + [f"{label}\t{text}" for label, text in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_folder(folder: Path, train, dev, test=None, suffix=".tsv") -> Path:
    write_rows(folder / f"train{suffix}", train)
    write_rows(folder / f"dev{suffix}", dev)
    if test is not None:
        write_rows(folder / f"test{suffix}", test)
    return folder


def train_tiny(output_dir: Path, dataset: Path | str, **overrides):
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    settings: dict[str, Any] = dict(model="scratch:tiny", dataset=str(dataset), output_dir=str(output_dir), epochs=2,
                    batch_size=16, lr=1e-3, device="cpu", seed=7)
    settings.update(overrides)
    return run_training(TrainConfig(**settings), say=lambda _: None).to_json()  # as metrics.json holds them


PARITY = synthetic_rows(220, seed=11)  # real-looking texts with gold labels for export parity checks


def export_tiny(checkpoint: Path, out: Path, **options):
    from senti.export.pipeline import ExportConfig, export_model

    config = ExportConfig(model=str(checkpoint), output_dir=str(out), **options)
    export_model(config, [t for _, t in PARITY], [label for label, _ in PARITY], say=lambda _: None)
    return json.loads((Path(out) / layout.EXPORT_META).read_text(encoding="utf-8"))  # exactly what export.json holds


# A real `senti serve` on 127.0.0.1 (the API key comes through --api-key-env).
KEY = "test-key-123"
AUTH = {"X-API-Key": KEY}


free_port = local_server.free_port


@contextmanager
def running_server(export_dir: Path, *extra: str):
    workers = [] if "--workers" in extra else ["--workers", "1"]  # the same on any number of cores
    proc, base = start_senti("serve", "--model", str(export_dir), "--backend", "onnx", "--threads", "2", *workers,
                             *extra)
    count = int(extra[extra.index("--workers") + 1]) if workers == [] else 1
    deadline = time.monotonic() + 60  # /readyz answered by one worker; the others may still be loading
    while count > 1 and _in_service(base) < count:
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"{count} workers were not in service in 60 s:\n{output_of(proc)}")
        time.sleep(0.2)
    try:
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def output_of(proc: subprocess.Popen) -> str:
    """All a process started by `start_senti` has written so far (stdout and stderr)."""
    return local_server.output_of(proc, last=None)


def _in_service(base: str) -> int:
    """Workers in service as the supervisor of `senti serve --workers N` counts them (0 before it has)."""
    return httpx.get(f"{base}/readyz", headers=AUTH, timeout=10).json().get("workers", {}).get("in_service", 0)


def start_senti(command: str, *args: str, port: int | None = None, ready: str = "/readyz",
                launcher: tuple[str, ...] = (sys.executable, "-m", "senti.cli")):
    """(process, base URL) of a senti command serving on 127.0.0.1 (the key through --api-key-env), once `ready`
    answers 200; the process's output is the error when it exits first, and `output_of(proc)` later.

    The output goes to a file, not a pipe: a pipe nobody reads fills at 64 kB and then blocks every process of the
    server that writes a line (a supervisor logging its workers' failures, for one)."""
    port = port or free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SENTI_TEST_KEY": KEY}
    proc = local_server.launch([*launcher, command, *args, "--port", str(port),
                                "--api-key-env", "SENTI_TEST_KEY"], env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(output_of(proc))
        try:
            if httpx.get(f"{base}{ready}", headers=AUTH, timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"senti {command} did not become ready in 60 s")


def requested_urls(driver) -> list[str]:
    """The URLs the browser asked for since the last call (from Chrome's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


# Texts that stress a tokenizer: empty, whitespace, Traditional, mixed scripts, emoji, full width, control
# characters, special-token names, long.
EDGE_CASES = [
    "", "   ", "\t\n ", "這家飯店的服務態度很差勁，環境還可以。", "iPhone 15 Pro Max 256GB 价格6999元 OK!",
    "好评👍😀🎉 绝了", "（）！？，。：；“”‘’【】《》～￥×", "ＡＢＣ１２３ｆｕｌｌ　ｗｉｄｔｈ", "Café naïve résumé ÀÉÎ",
    "a\u200bb\u00adc\x00\ufffd", "[UNK] [CLS] 好 [SEP]", "x" * 150, "很好" * 5000, "e\u0301 µ² º 〇 Ø",
]


def assert_one_reload_shape(record: dict, trigger: str) -> None:
    """A reload record as /readyz and /v1/status show it, from one process or from a supervisor of workers: the
    same keys, an ISO 8601 UTC time."""
    from senti.serving.model_slot import ReloadRecord

    assert set(record) == set(ReloadRecord.__dataclass_fields__), record
    assert record["trigger"] == trigger and datetime.fromisoformat(record["at"]).utcoffset() == timedelta(0), record


def assert_only_own_scripts(page) -> None:
    """script-src names each inline script of the page by its hash: no 'unsafe-inline' (it was there)."""
    import base64
    import hashlib
    import re

    policy = page.headers["content-security-policy"]
    scripts = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", page.text, re.DOTALL)
    script_src = policy.split("script-src", 1)[1].split(";", 1)[0]
    assert scripts and "unsafe-inline" not in script_src, policy
    for body in scripts:
        assert f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'" in script_src


# --- Hugging Face folders written at test time (no torch, no hub): the formats senti convert reads. ---------------

_TORCH_STORAGES = {"float32": "FloatStorage", "float16": "HalfStorage", "int64": "LongStorage"}


def _pickle_str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return b"X" + len(raw).to_bytes(4, "little") + raw  # BINUNICODE


def _pickle_int(value: int) -> bytes:
    return b"J" + value.to_bytes(4, "little", signed=True)  # BININT


def _pickle_tuple(items: list[bytes]) -> bytes:
    return b"(" + b"".join(items) + b"t"  # MARK ... TUPLE


def torch_state_pickle(entries: list[tuple[str, str, str, list[int], list[int], int]],
                       rebuild: tuple[str, str] = ("torch._utils", "_rebuild_tensor_v2")) -> bytes:
    """A `torch.save` state-dict pickle written opcode by opcode, as torch writes it (protocol 2): each entry
    (name, storage key, dtype, size, stride, numel). `rebuild` names the function each tensor is rebuilt with."""
    out = [b"\x80\x02", b"ccollections\nOrderedDict\n", b")R", b"("]
    for name, key, dtype, size, stride, numel in entries:
        storage = _pickle_tuple([_pickle_str("storage"), f"ctorch\n{_TORCH_STORAGES[dtype]}\n".encode(),
                                 _pickle_str(key), _pickle_str("cpu"), _pickle_int(numel)]) + b"Q"  # BINPERSID
        args = _pickle_tuple([storage, _pickle_int(0), _pickle_tuple([_pickle_int(n) for n in size]),
                              _pickle_tuple([_pickle_int(s) for s in stride]), b"\x89",  # NEWFALSE
                              b"ccollections\nOrderedDict\n)R"])
        out.append(_pickle_str(name) + f"c{rebuild[0]}\n{rebuild[1]}\n".encode() + args + b"R")
    out.append(b"u.")  # SETITEMS, STOP
    return b"".join(out)


def write_torch_bin(path: Path, tensors: dict, rebuild: tuple[str, str] = ("torch._utils", "_rebuild_tensor_v2"),
                    transposed: tuple[str, ...] = ()) -> Path:
    """A `pytorch_model.bin` in torch's zip format, without torch. Names in `transposed` are stored as torch stores
    `w.t()`: the transposed array's bytes with swapped strides."""
    import zipfile

    import numpy as np

    entries, storages = [], {}
    for i, (name, array) in enumerate(tensors.items()):
        array = np.asarray(array)
        if name in transposed and array.ndim == 2:
            data, stride = np.ascontiguousarray(array.T), [1, array.shape[0]]
        else:
            data, stride = np.ascontiguousarray(array), [int(np.prod(array.shape[k + 1:])) for k in range(array.ndim)]
        storages[str(i)] = data.astype(data.dtype.newbyteorder("<")).tobytes()
        entries.append((name, str(i), str(array.dtype), list(array.shape), stride, data.size))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", torch_state_pickle(entries, rebuild))
        archive.writestr("archive/byteorder", "little")
        for key, raw in storages.items():
            archive.writestr(f"archive/data/{key}", raw)
        archive.writestr("archive/version", "3\n")
    return path


HF_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set("".join(sum(CUES.values(), [])) +
                                                                        "".join(FILLER)))]


def hf_bert_weights(model_type: str, layers: int, hidden: int, vocab: int, positions: int, ffn: int,
                    seed: int = 0) -> dict:
    """Random encoder tensors under Hugging Face's names (`bert.` or `roberta.` prefix), torch's [out, in] Linears."""
    import numpy as np

    rng = np.random.default_rng(seed)
    prefix = "bert." if model_type == "bert" else "roberta."

    def normal(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": normal(vocab, hidden),
         "embeddings.position_embeddings.weight": normal(positions, hidden),
         "embeddings.token_type_embeddings.weight": normal(2 if model_type == "bert" else 1, hidden),
         "embeddings.LayerNorm.weight": 1 + normal(hidden, scale=0.1), "embeddings.LayerNorm.bias": normal(hidden),
         "embeddings.position_ids": np.arange(positions, dtype=np.int64)[None]}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name, (out, inp) in {"attention.self.query": (hidden, hidden), "attention.self.key": (hidden, hidden),
                                 "attention.self.value": (hidden, hidden),
                                 "attention.output.dense": (hidden, hidden), "intermediate.dense": (ffn, hidden),
                                 "output.dense": (hidden, ffn)}.items():
            w[p + name + ".weight"], w[p + name + ".bias"] = normal(out, inp), normal(out)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + name + ".weight"], w[p + name + ".bias"] = 1 + normal(hidden, scale=0.1), normal(hidden)
    w["pooler.dense.weight"], w["pooler.dense.bias"] = normal(hidden, hidden), normal(hidden)
    w["cls.predictions.bias"] = normal(vocab)  # a pretraining head: no place in ERNIE
    return {(k if k.startswith("cls.") else prefix + k): v for k, v in w.items()}


XLMR_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


def unigram_definition(vocab_size: int = 160) -> str:
    """An XLM-R-style Unigram tokenizer.json (<s> <pad> </s> <unk> first, <mask> last, Metaspace), trained by
    `tokenizers` on the synthetic reviews."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=XLMR_SPECIALS, unk_token="<unk>",
                                      shrinking_factor=0.9, max_piece_length=4)
    tok.train_from_iterator([t for _, t in synthetic_rows(2000, seed=21)] + ["Great value! café 123 ok"], trainer)
    tok.add_special_tokens([AddedToken("<mask>", special=True)])
    return tok.to_str()


def write_hf_folder(folder: Path, model_type: str = "bert", weights: str = "safetensors", tokenizer: str = "json",
                    layers: int = 2, hidden: int = 32, heads: int = 4, **config_overrides) -> Path:
    """A tiny Hugging Face BERT-family folder as the hub ships one: config.json, model.safetensors or a torch zip
    pytorch_model.bin, tokenizer.json (WordPiece, or `unigram`: XLM-R's kind) or vocab.txt, tokenizer_config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    pad = 0 if model_type == "bert" else 1
    vocab = list(HF_VOCAB)
    if pad == 1:  # RoBERTa-style ids: <s>-like [CLS] first, then the padding id 1
        vocab[0], vocab[1], vocab[2] = "[CLS]", "[PAD]", "[UNK]"
    definition = unigram_definition() if tokenizer == "unigram" else None
    if definition is not None:
        from tokenizers import Tokenizer

        vocab = [""] * Tokenizer.from_str(definition).get_vocab_size()
    offset = pad + 1 if model_type != "bert" else 0
    positions = 64 + offset
    config = {"model_type": model_type, "architectures": ["BertModel"], "vocab_size": len(vocab),
              "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": 2 * hidden, "hidden_act": "gelu", "max_position_embeddings": positions,
              "type_vocab_size": 2 if model_type == "bert" else 1, "layer_norm_eps": 1e-12, "pad_token_id": pad,
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, **config_overrides}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    tensors = hf_bert_weights(model_type, layers, hidden, len(vocab), positions, 2 * hidden)
    if weights == "safetensors":
        from safetensors.numpy import save_file

        save_file(tensors, str(folder / "model.safetensors"))
    else:
        write_torch_bin(folder / "pytorch_model.bin", tensors,
                        transposed=tuple(k for k in tensors if k.endswith("query.weight")))
    if definition is not None:
        (folder / "tokenizer.json").write_text(definition, encoding="utf-8")
    elif tokenizer == "json":
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

        tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.save(str(folder / "tokenizer.json"))
    else:
        (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    if definition is None:
        (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}), encoding="utf-8")
    else:  # as XLM-R's folders spell them
        (folder / "special_tokens_map.json").write_text(json.dumps(
            {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "unk_token": "<unk>",
             "pad_token": "<pad>", "mask_token": {"content": "<mask>", "lstrip": True}}), encoding="utf-8")
    return folder
