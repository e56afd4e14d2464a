"""`serving`: tokenizer parity with ErnieTokenizer, Predictor, the import boundary, and `senti predict`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from senti.core.calibration import calibrated_probabilities
from senti.core.errors import ArtifactError, SentiError
from senti.core.sequence import text_budget
from senti.serving import Predictor
from senti.serving.tokenizer import FastTokenizer, read_limit
from tests.helpers import AUTH, EDGE_CASES, PARITY, running_server

ROOT = Path(__file__).resolve().parents[2]


def _ernie_tokenizer(checkpoint: Path):
    from paddlenlp.transformers import ErnieTokenizer

    return ErnieTokenizer.from_pretrained(str(checkpoint))


def test_fast_tokenizer_matches_ernie_tokenizer_on_edge_cases(tiny_checkpoint):
    ckpt, _ = tiny_checkpoint
    slow, fast = _ernie_tokenizer(ckpt), FastTokenizer(ckpt / "vocab.txt")
    for max_len in (128, 16):
        expected = [slow(t, max_length=max_len, truncation=True)["input_ids"] for t in EDGE_CASES]
        assert fast(EDGE_CASES, max_len) == expected


def test_fast_tokenizer_matches_ernie_tokenizer_on_chnsenticorp_dev(chnsenticorp, tmp_path):
    """A vocabulary built from ChnSentiCorp train, tokenizing every dev text (Traditional rows included)."""
    from paddlenlp.transformers import ErnieTokenizer

    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.training.models import build_char_vocab

    splits = load_splits(str(chnsenticorp))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(build_char_vocab([e.text for e in splits.train])) + "\n", encoding="utf-8")
    slow, fast = ErnieTokenizer(str(vocab)), FastTokenizer(vocab)
    texts = [e.text for e in splits.dev]
    expected = [slow(t, max_length=128, truncation=True)["input_ids"] for t in texts]
    got = fast(texts, 128)
    mismatched = [t for t, a, b in zip(texts, expected, got) if a != b]
    assert not mismatched, mismatched[:3]
    assert len(texts) == 1200


TESTED_BACKENDS = ["onnx", "onnx-opt", "onnx-int8", "onnx-int8-static", "onnx-fp16", "paddle"]


def test_every_backend_and_preset_has_a_test():
    from senti.serving.backends import BACKENDS
    from senti.toolkit.training.distill import STUDENT_PRESETS
    from senti.toolkit.training.models import PRESETS, SHAPES

    assert set(BACKENDS) == set(TESTED_BACKENDS)
    # Presets are names for shapes: each one must resolve to a shape the model builder knows.
    assert set(PRESETS.values()) | set(STUDENT_PRESETS.values()) <= set(SHAPES)
    from senti.toolkit.training.models import ernie_config

    for name, (layers, hidden, heads, ffn) in SHAPES.items():
        config = ernie_config(name, 100, ["a", "b"], 128)
        assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size) == (layers, hidden, ffn)
        assert hidden % heads == 0 and config.num_labels == 2, name


def test_public_names_are_pinned():
    import senti.serving as serving

    assert sorted(serving.__all__) == ["ArtifactError", "Prediction", "Predictor", "SentiError"]


@pytest.mark.parametrize("backend", TESTED_BACKENDS)
def test_predictor_matches_the_dynamic_graph(_exported, _trained_checkpoint, backend):
    import paddle

    from senti.core.checkpoint import load_checkpoint

    out, record = _exported
    texts = [t for _, t in PARITY[:60]]
    predictor = Predictor.load(out, backend=backend, threads=2)
    predictions = predictor.predict(texts, batch_size=8)
    model, tokenizer, _ = load_checkpoint(_trained_checkpoint / "checkpoint")
    with paddle.no_grad():
        expected = [model(paddle.to_tensor([tokenizer(t)["input_ids"]])).numpy()[0] for t in texts]
    probs = np.array([[p.probabilities[lab] for lab in record["labels"]] for p in predictions])
    want = calibrated_probabilities(np.array(expected), predictor.calibration)  # the export's temperature
    assert np.abs(probs - want).max() < (0.05 if backend in ("onnx-int8", "onnx-int8-static", "onnx-fp16") else 1e-4)
    assert [p.label for p in predictions][:5] == [record["labels"][int(np.argmax(e))] for e in expected][:5]
    assert all(p.score == max(p.probabilities.values()) for p in predictions)


def test_order_is_kept_and_long_texts_are_flagged(_exported):
    out, _ = _exported
    predictor = Predictor.load(out, backend="onnx")
    texts = ["非常好很满意" * 80, "太差了", "", "很失望" * 5]
    batched = predictor.predict(texts, batch_size=2)
    single = [predictor.predict([t])[0] for t in texts]
    assert [p.label for p in batched] == [p.label for p in single]
    assert [p.score for p in batched] == pytest.approx([p.score for p in single], abs=1e-5)
    assert [p.truncated for p in batched] == [True, False, False, False]
    assert predictor.predict([]) == []
    with pytest.raises(TypeError, match="list of texts"):
        predictor.predict("一个字符串")  # the mistake under test (a str is a Sequence)


def test_padding_cuts_minimise_padded_work_and_keep_every_text():
    from senti.core.batching import length_sorted_batches

    lengths = [10] * 30 + [128, 128]
    parts = length_sorted_batches(lengths, 32, call_cost_tokens=128)
    assert [len(p) for p in parts] == [30, 2]  # 2 long texts would pad 30 short ones to 128
    assert length_sorted_batches([100] * 32, 32, call_cost_tokens=128)[0].tolist() == list(range(32))
    rng = np.random.default_rng(0)
    for _ in range(20):  # against brute force over every way to cut a small sorted run
        lengths = sorted(rng.integers(1, 129, size=7).tolist())
        cost = int(rng.integers(0, 200))
        parts = length_sorted_batches(lengths, 7, call_cost_tokens=cost)
        assert sorted(np.concatenate(parts).tolist()) == list(range(7))
        got = sum(cost + len(p) * max(lengths[i] for i in p) for p in parts)
        best = min(sum(cost + (b - a) * lengths[b - 1] for a, b in zip((0, *cuts), (*cuts, 7)))
                   for mask in range(64) for cuts in [tuple(i + 1 for i in range(6) if mask >> i & 1)])
        assert got == best


def test_cut_batches_give_the_same_answers(_exported):
    out, _ = _exported
    predictor = Predictor.load(out, backend="onnx")
    assert predictor.call_cost_tokens is not None  # on by default on CPU
    texts = ["好" * n for n in (3, 120, 5, 90, 2, 7, 60, 1)]
    cut = predictor.logits(texts)[0]
    predictor.call_cost_tokens = None
    assert np.abs(cut - predictor.logits(texts)[0]).max() < 1e-4


def test_sliding_window_averages_the_windows(_exported):
    out, _ = _exported
    window = Predictor.load(out, backend="onnx", long_text="window", stride=63)
    text = "太差了很失望" * 60  # 360 tokens: windows of 126 at 0, 63, ..., then one ending at the last token
    result = window.predict([text])[0]
    assert result.truncated and result.windows == 5
    ids = window.tokenizer.encode_batch([text])[0]
    starts = [0, 63, 126, 189, 234]
    pieces = [[window.tokenizer.cls_id, *ids[s : s + 126], window.tokenizer.sep_id] for s in starts]
    logits = np.stack([window.backend(np.array([p]), np.zeros((1, 128), dtype=np.int64))[0] for p in pieces])
    probs = calibrated_probabilities(logits.mean(0, keepdims=True), window.calibration)[0]  # the export's temperature
    assert [result.probabilities[k] for k in window.labels] == pytest.approx(probs.tolist(), abs=1e-5)


def test_bad_exports_and_settings(_exported, tmp_path):
    out, _ = _exported
    with pytest.raises(ArtifactError, match="not a senti export"):
        Predictor.load(tmp_path)
    with pytest.raises(SentiError, match="unknown backend 'tensorrt'"):
        Predictor.load(out, backend="tensorrt")
    with pytest.raises(SentiError, match="long_text must be one of"):
        Predictor.load(out, long_text="summarize")


def test_serving_imports_neither_paddlenlp_nor_toolkit(_exported):
    """In a process where importing paddlenlp, toolkit or paddle fails, serving still predicts (ONNX)."""
    out, _ = _exported
    script = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("paddlenlp", "paddle") or name.startswith(
                        ("senti.toolkit", "senti.export", "senti.cli", "senti.benchmarks")):
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        from senti.serving import Predictor
        p = Predictor.load({str(out)!r}, backend="onnx")
        print(p.predict(["非常好很满意", "太差了很失望"])[0].label)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "positive"


def test_predict_cli_prints_a_table(_exported):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--backend", "onnx", "非常好很满意", "太差了很失望"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "非常好很满意" in line or "太差了很失望" in line]
    assert "positive" in lines[0] and "negative" in lines[1]


@pytest.mark.parametrize("suffix", [".txt", ".tsv", ".csv", ".jsonl"])
def test_predict_file_keeps_every_row_in_order(_exported, tmp_path, suffix):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    texts = [t for _, t in PARITY[:50]]
    src = tmp_path / f"in{suffix}"
    bad_lines = {7, 20}
    with src.open("wb") as fh:
        if suffix in (".tsv", ".csv"):
            fh.write(b"id" + (b"\t" if suffix == ".tsv" else b",") + b"text\n")
        for i, text in enumerate(texts):
            line_no = i + (2 if suffix in (".tsv", ".csv") else 1)
            if line_no in bad_lines:
                fh.write(b"\xff\xfe broken\n" if suffix != ".jsonl" else b'{"text": \n')
                continue
            sep = "\t" if suffix == ".tsv" else ","
            line = {".txt": text, ".jsonl": json.dumps({"id": i, "text": text}, ensure_ascii=False)}.get(
                suffix, f"{i}{sep}{text}")
            fh.write(line.encode() + b"\n")
    dst = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--backend", "onnx", "--input", str(src),
                                      "--output", str(dst), "--batch-size", "8"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(texts)
    first_line = 2 if suffix in (".tsv", ".csv") else 1
    assert [r["line"] for r in rows] == list(range(first_line, first_line + len(texts)))
    errors = {r["line"] for r in rows if r["error"]}
    assert errors == bad_lines and all(r["label"] is None for r in rows if r["error"])
    expected = Predictor.load(out, backend="onnx").predict([r["text"] for r in rows if not r["error"]])
    assert [r["label"] for r in rows if not r["error"]] == [p.label for p in expected]
    assert "2 error rows" in result.output and not list(tmp_path.glob(".out.jsonl.partial*"))


def test_predict_cli_errors(_exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    runner = CliRunner()
    result = runner.invoke(app, ["predict", "--model", str(out)])
    assert result.exit_code == 2 and "give texts as arguments or one --input file" in result.output
    src = tmp_path / "in.csv"
    src.write_text("body\n好\n", encoding="utf-8")
    result = runner.invoke(app, ["predict", "--model", str(out), "--input", str(src), "--output",
                                 str(tmp_path / "o.tsv")])
    assert result.exit_code == 2 and "no text column" in result.output
    assert not (tmp_path / "o.tsv").exists() and not list(tmp_path.glob(".o.tsv.partial*"))
    result = runner.invoke(app, ["predict", "--model", str(tmp_path), "好"])
    assert result.exit_code == 2 and "not a senti export" in result.output



def test_a_long_text_is_read_only_as_far_as_the_model_can_use_and_its_ids_stay_exact(_exported):

    predictor = Predictor.load(_exported[0], backend="onnx")
    tokenizer = predictor.tokenizer
    words = "internationalization wonderful 好评 [MASK] 差评！ café " * 40
    texts = [words, "好" * 500, "a" * 300 + " 好", "x" * 150 + "[MASK]" + "好" * 200, "好" + " " * 3000 + "差",
             "短文本", " ".join(t for _, t in PARITY[:30]), "[UNK]" * 100, "good" + "\u0301" * 400 + " bad"]
    for need in (5, 10, 37):
        # exact ids of what is read: the whole text, or its first read_limit(need) characters (a text of mostly
        # spaces, whose tokens lie past that, counts as cut there)
        whole = tokenizer.encode_batch([t[: read_limit(need)] for t in texts])
        heads = tokenizer.encode_batch(texts, need=need)
        for text, full, head in zip(texts, whole, heads):
            if len(full) <= need:
                assert head == full, text[:40]
            else:  # more than `need` ids, each one the whole text's
                assert len(head) > need and head == full[: len(head)], (need, text[:40])
    # A megabyte of text costs what the model reads of it; answers are the same as for its head.
    huge = "这家酒店服务很好，" * 120_000
    started = time.perf_counter()
    [big] = predictor.predict([huge])
    assert time.perf_counter() - started < 0.5 and big.truncated
    assert big.probabilities == predictor.predict([huge[:2000]])[0].probabilities
    window = Predictor.load(_exported[0], backend="onnx", long_text="window", max_windows=3)
    with pytest.raises(SentiError, match="needs more than 3 windows, the most per text"):
        window.predict([huge])


@pytest.mark.parametrize("filler", [" ", "\u200b", "\n\t"])
def test_text_that_makes_no_token_cannot_dodge_the_cost_per_byte(_exported, filler):
    # A megabyte of spaces (or zero-width spaces, or newlines) before one character made no token, so the head
    # reader grew until it had tokenized the whole megabyte: 16 such requests held a one-worker server 3-14 s.
    predictor = Predictor.load(_exported[0], backend="onnx")
    read: list[int] = []
    rust = predictor.tokenizer._tokenizer

    class Recording:
        def encode(self, text, **kw):
            read.append(len(text))
            return rust.encode(text, **kw)

        def encode_batch(self, texts, **kw):
            read.extend(len(t) for t in texts)
            return rust.encode_batch(texts, **kw)

    predictor.tokenizer._tokenizer = Recording()  # type: ignore[assignment]
    [answer] = predictor.predict([filler * 1_040_000 + "好"])
    limit = read_limit(text_budget(predictor.max_seq_len))
    assert read and max(read) <= limit < 20_000
    assert answer.truncated  # the model read only the head: the answer says so


def _metric(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def test_long_texts_are_limited_by_windows(_exported):
    out, _ = _exported
    long_text = "好" * 300  # 300 tokens: 4 windows of 126 tokens at stride 63
    predictor = Predictor.load(out, backend="onnx", long_text="window", max_windows=3)
    assert predictor.windows(["好", long_text]) == [1, 4]
    with pytest.raises(SentiError, match="text 1: needs 4 windows; at most 3 per text"):
        predictor.predict(["好", long_text])
    with running_server(out, "--long-text", "window", "--max-windows-per-text", "4", "--max-windows", "6") as (base, _):
        post = lambda texts: httpx.post(f"{base}/v1/predict", json={"texts": texts}, headers=AUTH)  # noqa: E731
        assert post([long_text]).json()["predictions"][0]["windows"] == 4
        too_long = post(["好", long_text + "好" * 63])
        assert too_long.status_code == 413 and too_long.json()["detail"][0]["loc"] == ["body", "texts", 1]
        too_much = post([long_text, long_text])
        assert too_much.status_code == 413 and "8 model inputs (windows); at most 6" in too_much.json()["detail"]
        metrics = httpx.get(f"{base}/metrics").text
        assert _metric(metrics, "senti_windows_total") == 4 and _metric(metrics, "senti_texts_total") == 1
        assert 'senti_requests_total{status="413"} 2.0' in metrics


def test_auto_serves_int8_only_on_a_cpu_with_an_int8_dot_product(tmp_path):
    """Without VNNI or AMX an INT8 model is no faster than fp32 and costs accuracy: `auto` ranked it first on
    every CPU. The flags come from /proc/cpuinfo and are recorded with every figure."""
    from senti.core.runtime import cpu_info, int8_is_fast
    from senti.serving.backends import auto_order

    assert auto_order("cpu", int8_fast=True)[0] == "onnx-int8-static"
    without = auto_order("cpu", int8_fast=False)
    assert without[0] != "onnx-int8-static" and without[-1] == "onnx-int8-static"
    assert set(without) == set(auto_order("cpu", int8_fast=True))
    fake = tmp_path / "cpuinfo"
    fake.write_text("vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n", encoding="utf-8")
    info = cpu_info(str(fake))
    assert info["flags"] == ["avx2"] and not int8_is_fast(info["flags"])
    assert int8_is_fast(["avx2", "avx512_vnni"]) and int8_is_fast(["amx_int8"])
