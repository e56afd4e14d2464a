"""examples/node: a senti export scored from Node.js (onnxruntime-node, tokenizers.js) gives senti.serving's answers.

The example's npm dependencies are installed by the test from its lockfile (npm reaches the registry here and in
CI); the whole file is skipped, with the reason, where `node` or `npm` is absent.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import (
    EDGE_CASES,
    PARITY,
    export_tiny,
    synthetic_aspect_rows,
    synthetic_rows,
    train_aspect_heads,
    train_tiny,
    write_folder,
    write_hf_folder,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "node"

if not (shutil.which("node") and shutil.which("npm")):
    pytest.skip("node and npm are not installed: the Node.js example cannot run", allow_module_level=True)


@pytest.fixture(scope="module")
def node_example(tmp_path_factory) -> Path:
    """A copy of examples/node with its locked dependencies installed."""
    folder = tmp_path_factory.mktemp("node")
    for name in ("package.json", "package-lock.json", ".npmrc", "scorer.mjs", "senti.mjs", "cli.mjs", "server.mjs",
                 "aspects.mjs"):
        shutil.copy(EXAMPLE / name, folder / name)
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=folder, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def synthetic_texts(n: int = 1000, seed: int = 11) -> list[str]:
    """Short and long reviews, mixed scripts, emoji, whitespace, empty and text that makes no token."""
    rng = random.Random(seed)
    reviews = [t for _, t in synthetic_rows(400, seed=seed)]
    pieces = reviews + ["Great value!", "café naïve ÉCOLE", "😀👍🏽", "１２３ＡＢＣ", "[MASK] 好", "￥99 ×2 ～"] + EDGE_CASES
    texts = ["", " ", "\n\t", "好", " " * 20_000 + "差评", "\u200b" * 9_000 + "好评"]
    while len(texts) < n:
        k = rng.choice((1, 1, 2, 3, 40))  # now and then far past max_seq_len
        texts.append(rng.choice(("", " ", "  \n")).join(rng.choice(pieces) for _ in range(k)))
    return texts[:n]


def node_answers(example: Path, export: Path, texts: list[str], fmt: str) -> list[dict]:
    done = subprocess.run(["node", str(example / "cli.mjs"), str(export), "--format", fmt],
                          input="".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("fmt", ["onnx", "onnx-int8-static"])
def test_node_scores_as_senti_serving_does(node_example, _exported, fmt):
    from senti.serving import Predictor

    export, _ = _exported
    predictor = Predictor.load(export, backend=fmt, threads=1)
    meta = json.loads((export / "export.json").read_text(encoding="utf-8"))
    texts = meta["parity_sample"]["texts"] + [t for _, t in PARITY] + synthetic_texts()
    python = predictor.predict(texts, batch_size=1)
    node = node_answers(node_example, export, texts, fmt)
    assert len(node) == len(texts)
    assert [a["label"] for a in node] == [p.label for p in python]
    assert [a["truncated"] for a in node] == [p.truncated for p in python]
    got = np.array([[a["probabilities"][lab] for lab in predictor.labels] for a in node])
    want = np.array([[p.probabilities[lab] for lab in predictor.labels] for p in python])
    # the export's calibrated probabilities: fp32 to 1e-6; the INT8 model's kernels differ a little between ORT builds
    assert predictor.calibration is not None
    assert np.abs(got - want).max() <= (1e-6 if fmt == "onnx" else 1e-3), np.abs(got - want).max()
    if fmt == "onnx":  # the same flag wherever the probability is the same
        assert [a["unsure"] for a in node] == [p.unsure for p in python] and any(p.unsure for p in python)


def test_node_scores_a_model_with_its_own_unigram_tokenizer_as_senti_serving_does(node_example, tmp_path):
    """An XLM-R-style start (tokenizer.json with a Unigram model, <s>/</s>/<pad>=1): Node reads the export's
    tokenizer.json and gives senti.serving's ids and answers."""
    from senti.serving import Predictor

    data = write_folder(tmp_path / "data", synthetic_rows(300, seed=1), synthetic_rows(60, seed=2),
                        synthetic_rows(60, seed=3))
    source = write_hf_folder(tmp_path / "hf", model_type="xlm-roberta", tokenizer="unigram")
    train_tiny(tmp_path / "ckpt", data, model=str(source), epochs=1, max_steps=8, max_seq_len=32, baseline=False)
    export = tmp_path / "export"
    export_tiny(tmp_path / "ckpt", export, formats=["onnx"])
    predictor = Predictor.load(export, backend="onnx", threads=1)
    texts = [t for _, t in PARITY] + synthetic_texts(300)
    python = predictor.predict(texts, batch_size=1)
    node = node_answers(node_example, export, texts, "onnx")
    assert [a["label"] for a in node] == [p.label for p in python]
    assert [a["truncated"] for a in node] == [p.truncated for p in python]
    got = np.array([[a["probabilities"][lab] for lab in predictor.labels] for a in node])
    want = np.array([[p.probabilities[lab] for lab in predictor.labels] for p in python])
    assert np.abs(got - want).max() <= 1e-4, np.abs(got - want).max()


def test_node_refuses_what_senti_serving_refuses(node_example, _exported, tmp_path):
    export, _ = _exported
    swapped = tmp_path / "swapped"
    shutil.copytree(export, swapped)
    meta = json.loads((swapped / "export.json").read_text(encoding="utf-8"))
    meta["labels"].reverse()  # the label names swapped: every answer would be inverted
    (swapped / "export.json").write_text(json.dumps(meta), encoding="utf-8")
    done = subprocess.run(["node", str(node_example / "cli.mjs"), str(swapped)], input="好\n", capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "differ from those recorded with the parity answers" in done.stderr
    reversed_vocab = tmp_path / "vocab"
    shutil.copytree(export, reversed_vocab)
    tokenizer = json.loads((reversed_vocab / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tokenizer["model"]["vocab"]
    plain = sorted((t for t in vocab if not t.startswith("[")), key=vocab.get)
    for token, new_id in zip(plain, sorted((vocab[t] for t in plain), reverse=True)):
        vocab[token] = new_id
    (reversed_vocab / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run(["node", str(node_example / "cli.mjs"), str(reversed_vocab)], input="好\n",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "does not reproduce its recorded parity answers" in done.stderr


@pytest.mark.parametrize("field,value,message", [
    ("max_seq_len", 4096, "max_seq_len must be between 8 and 2048; got 4096"),
    ("cls_token", "[NOPE]", "cls_token \"[NOPE]\" is not in tokenizer.json"),
    ("temperature", 0, "calibration temperature must be a positive finite number; got 0"),
    ("temperature", -2, "calibration temperature must be a positive finite number; got -2"),
    ("temperature", "hot", "calibration temperature must be a positive finite number; got \"hot\""),
    ("threshold", 1.5, "abstention threshold must be a number in [0, 1]; got 1.5"),
])
def test_node_refuses_a_length_or_a_token_senti_serving_would_not_load(node_example, _exported, tmp_path, field,
                                                                        value, message):
    """Node loaded max_seq_len 4096 (Python refuses it) and a long text then killed it; an unknown cls_token said
    `Cannot convert undefined to a BigInt`; a temperature or threshold Python refuses is refused here too."""
    from senti.core.errors import ArtifactError
    from senti.serving import Predictor

    export, _ = _exported
    bad = tmp_path / "bad"
    shutil.copytree(export, bad)
    meta = json.loads((bad / "export.json").read_text(encoding="utf-8"))
    where = {"cls_token": meta["tokenizer"], "temperature": meta["calibration"], "threshold": meta["abstain"]}
    where.get(field, meta)[field] = value
    if field in ("temperature", "threshold"):
        (bad / "export.json").write_text(json.dumps(meta), encoding="utf-8")
        with pytest.raises(ArtifactError, match="must be a"):  # Python refuses the same file
            Predictor.load(bad, backend="onnx")
    (bad / "export.json").write_text(json.dumps(meta), encoding="utf-8")
    done = subprocess.run(["node", str(node_example / "cli.mjs"), str(bad)], input="好\n", capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_node_and_python_refuse_a_parity_sample_no_export_writes_and_name_a_fifo_as_such(node_example, _exported,
                                                                                         tmp_path):
    """200,000 planted parity texts held the start for over a minute; a FIFO export.json was said to lead outside the
    folder."""
    import os

    from senti.core.errors import ArtifactError
    from senti.serving import Predictor

    export, _ = _exported
    bad = tmp_path / "bad"
    shutil.copytree(export, bad)
    meta = json.loads((bad / "export.json").read_text(encoding="utf-8"))
    sample = meta["parity_sample"]
    sample["texts"] = sample["texts"] * 100
    sample["logits"] = sample["logits"] * 100
    (bad / "export.json").write_text(json.dumps(meta), encoding="utf-8")
    started = time.monotonic()
    done = subprocess.run(["node", str(node_example / "cli.mjs"), str(bad)], input="好\n", capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "the parity sample holds more than 1024 texts" in done.stderr
    assert time.monotonic() - started < 30
    with pytest.raises(ArtifactError, match="the parity sample holds more than 1024 texts"):
        Predictor.load(bad, backend="onnx")
    fifo = tmp_path / "fifo"
    shutil.copytree(export, fifo)
    (fifo / "export.json").unlink()
    os.mkfifo(fifo / "export.json")
    done = subprocess.run(["node", str(node_example / "cli.mjs"), str(fifo)], input="好\n", capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "metadata export.json is not a regular file" in done.stderr, done.stderr
    with pytest.raises(ArtifactError, match="export.json: the export metadata is not a regular file"):
        Predictor.load(fifo, backend="onnx")  # it said "not a senti export (no export.json)"


def _abort_mid_body(port: int) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000\r\n\r\n{\"texts\": [")
    time.sleep(0.5)


def _split_body_answer(port: int, text: str) -> dict:
    """POST {"texts": [text]} sent in two writes, the first ending inside the text's first character."""
    import socket

    body = json.dumps({"texts": [text]}, ensure_ascii=False).encode("utf-8")
    cut = body.index(text.encode("utf-8")) + 1  # one byte into a three-byte character
    head = (f"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + body[:cut])
        time.sleep(0.3)
        sock.sendall(body[cut:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0], answer[:300]
    if b"chunked" in head.lower():  # one chunk: SIZE CRLF DATA CRLF 0 CRLF CRLF
        payload = payload.split(b"\r\n", 1)[1].rsplit(b"\r\n0\r\n", 1)[0]
    return json.loads(payload)


def test_the_node_http_handler_answers_like_senti_serving(node_example, _exported):
    import httpx

    from senti.serving import Predictor
    from tests.helpers import free_port

    export, _ = _exported
    port = free_port()
    server = subprocess.Popen(["node", str(node_example / "server.mjs"), str(export), str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().startswith("listening on 127.0.0.1")
        texts = [t for _, t in PARITY[:20]]
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/predict", json={"texts": texts}, timeout=60)
        assert answer.status_code == 200
        python = Predictor.load(export, backend="onnx-int8-static").predict(texts)
        assert [p["label"] for p in answer.json()["predictions"]] == [p.label for p in python]
        bad = httpx.post(f"http://127.0.0.1:{port}/v1/predict", json={"texts": "好"}, timeout=60)
        assert bad.status_code == 422
        huge = httpx.post(f"http://127.0.0.1:{port}/v1/predict", content=b"x" * (2 << 20), timeout=60)
        assert huge.status_code == 413
        started = time.monotonic()
        assert httpx.post(f"http://127.0.0.1:{port}/v1/predict", json={"texts": ["好"]}, timeout=60).status_code == 200
        assert time.monotonic() - started < 10  # still serving after the bad requests
        _abort_mid_body(port)  # a client that sends 10 bytes of 100,000 and goes: Node exited on it before
        assert httpx.post(f"http://127.0.0.1:{port}/v1/predict", json={"texts": ["好"]}, timeout=60).status_code == 200
        assert server.poll() is None
        # bytes, not UTF-16 units: 600,000 Chinese characters are 1.8 MB (accepted before)
        wide = httpx.post(f"http://127.0.0.1:{port}/v1/predict", json={"texts": ["好" * 600_000]}, timeout=60)
        assert wide.status_code == 413
        # a body in two reads that cut a character in two: two U+FFFD in the text before
        text = "质量垃圾，很失望"
        whole = httpx.post(f"http://127.0.0.1:{port}/v1/predict", json={"texts": [text]}, timeout=60).json()
        assert _split_body_answer(port, text) == whole
    finally:
        server.kill()
        server.wait()


ASPECTS = {"aspects": [{"name": "service", "label": "服务", "keywords": ["服务员", "态度"]},
                       {"name": "price", "keywords": ["价格", "贵"]}, {"name": "parking", "keywords": ["停车"]}]}
ASPECT_TEXTS = ["服务员非常好，很满意。价格太贵了！很失望", "  价格物超所值，推荐购买  ", "没有提到任何方面",
                "😀态度很好～～停车方便；", "服务员态度差。。。服务员态度差", ""]


@pytest.mark.parametrize("unit, margin", [("sentence", 0.0), ("clause", 0.1)])
def test_node_answers_aspects_as_senti_aspects_does(node_example, _exported, tmp_path, unit, margin):
    from senti.core.aspects import parse_aspects
    from senti.serving import Predictor
    from senti.serving.aspects import answer_aspects

    export, _ = _exported
    listed = tmp_path / "aspects.json"
    listed.write_text(json.dumps(ASPECTS, ensure_ascii=False), encoding="utf-8")
    texts = ASPECT_TEXTS + [t for _, t in PARITY[:30]]
    done = subprocess.run(["node", str(node_example / "cli.mjs"), str(export), "--aspects", str(listed), "--unit", unit,
                           "--neutral-margin", str(margin)], capture_output=True, text=True, timeout=300,
                          input="".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts if t))
    assert done.returncode == 0, done.stderr[-3000:]
    node = [json.loads(line) for line in done.stdout.splitlines()]
    python = answer_aspects(Predictor.load(export, backend="onnx"), [t for t in texts if t],
                            parse_aspects(ASPECTS, "test"), unit, margin)
    assert len(node) == len(python) == len(texts) - 1
    assert sum(a.polarity != "not_mentioned" for row in python for a in row.values()) >= 6
    for got, want in zip(node, python):
        assert list(got) == list(want)
        for name, answer in want.items():
            assert got[name]["polarity"] == answer.polarity
            assert got[name]["evidence"] == answer.to_json()["evidence"]  # offsets in characters, as Python's
            assert (got[name]["score"] is None) == (answer.score is None)
            assert answer.score is None or abs(got[name]["score"] - answer.score) <= 1e-5


def test_node_answers_an_aspect_heads_export_as_senti_aspects_does(node_example, tmp_path):
    from senti.core.aspects import read_aspects
    from senti.serving import Predictor

    data, _, export, _ = train_aspect_heads(tmp_path)
    texts = [r["text"] for r in synthetic_aspect_rows(40, seed=5)] + ["服务很热情，味道难吃死。", "今天天气不错"]
    done = subprocess.run(["node", str(node_example / "cli.mjs"), str(export), "--aspects", str(data / "aspects.json")],
                          capture_output=True, text=True, timeout=300,
                          input="".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts))
    assert done.returncode == 0, done.stderr[-3000:]
    node = [json.loads(line) for line in done.stdout.splitlines()]
    python = Predictor.load(export, backend="onnx").aspects(texts, read_aspects(data / "aspects.json"))
    assert len(node) == len(python) == len(texts)
    assert {a.polarity for row in python for a in row.values()} == {"positive", "neutral", "negative", "not_mentioned"}
    for got, want in zip(node, python):
        assert {name: a["polarity"] for name, a in got.items()} == {name: a.polarity for name, a in want.items()}
        for name, answer in want.items():
            assert got[name]["evidence"] == answer.to_json()["evidence"]
            assert answer.score is None or abs(got[name]["score"] - answer.score) <= 1e-5
    parking = tmp_path / "parking.json"
    parking.write_text(json.dumps({"aspects": [{"name": "parking", "keywords": ["停车"]}]}), encoding="utf-8")
    refused = subprocess.run(["node", str(node_example / "cli.mjs"), str(export), "--aspects", str(parking)],
                             capture_output=True, text=True, timeout=300, input='"停车方便"\n')
    assert refused.returncode != 0 and "it has no head for parking" in refused.stderr


@pytest.mark.parametrize("listed, says", [
    ({"aspects": [{"name": "a b", "keywords": ["x"]}]}, "aspect 1: name \"a b\" must be 1-64 letters"),
    ({"aspects": [{"name": "a", "keywords": []}]}, "aspect 1 (a): keywords must be a list of 1 to 200 words"),
    ({"aspects": [{"name": "a", "keywords": ["x"]}] * 2}, "aspect name 'a' appears twice"),
    ({"aspects": [{"name": f"a{i}", "keywords": ["x"]} for i in range(10_000)]}, "10000 aspects; at most 256"),
    ("{not json", "the aspect file is not valid JSON"),
])
def test_node_refuses_an_aspect_list_senti_refuses(node_example, _exported, tmp_path, listed, says):
    from senti.core.aspects import read_aspects
    from senti.core.errors import SentiError

    export, _ = _exported
    path = tmp_path / "aspects.json"
    path.write_text(listed if isinstance(listed, str) else json.dumps(listed), encoding="utf-8")
    done = subprocess.run(["node", str(node_example / "cli.mjs"), str(export), "--aspects", str(path)],
                          input="价格好\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "" and says in done.stderr, done.stderr
    with pytest.raises(SentiError):
        read_aspects(path)
