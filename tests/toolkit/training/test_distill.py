"""`senti distill`: losses, cached teacher logits, extra texts, layer init, outputs, and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from senti.core import layout
from senti.core.errors import SentiError
from senti.toolkit.training.distill import DistillConfig, layer_map, run_distillation
from tests.helpers import EMOTIONS, export_tiny, synthetic_rows, write_folder


def _distill(teacher, data, out, **overrides):
    settings: dict[str, Any] = dict(teacher=str(teacher), student="3l-128h", dataset=str(data), output_dir=str(out), epochs=2,
                    batch_size=16, lr=1e-3, device="cpu", seed=3)
    settings.update(overrides)
    report = run_distillation(DistillConfig(**settings), say=lambda _: None)
    assert report is not None
    return report.to_json()  # as distill.json holds it


def test_distilled_student_is_an_ordinary_checkpoint_with_a_report(tiny_checkpoint, tmp_path, monkeypatch):
    import senti.toolkit.training.distill as distill

    ckpt, data = tiny_checkpoint
    calls = []
    real = distill.predict_logits

    def counted(model, ids, **kw):
        calls.append(len(ids))
        return real(model, ids, **kw)

    monkeypatch.setattr(distill, "predict_logits", counted)
    extra = tmp_path / "extra.txt"
    dev_text = (data / "dev.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t", 1)[1]
    extra.write_text("\n".join([t for _, t in synthetic_rows(100, seed=9)] + [dev_text]) + "\n", encoding="utf-8")
    out = tmp_path / "student"
    report = _distill(ckpt, data, out, extra_texts=str(extra))
    assert json.loads((out / layout.DISTILL_META).read_text(encoding="utf-8")) == report
    # Teacher logits for the 600 train rows + extras: once, not once per epoch.
    assert calls.count(600 + report["extra_texts"]["used"]) == 1
    assert report["extra_texts"]["used"] <= 100 and report["extra_texts"]["excluded_dev_test_or_duplicate"] >= 1
    assert report["student"]["parameters"] < report["teacher"]["parameters"] * 2
    assert 0 < report["student"]["dev_accuracy"] <= 1 and "test_accuracy" in report["student"]
    assert report["student"]["kept_of_teacher_accuracy"] == pytest.approx(
        report["student"]["dev_accuracy"] / report["teacher"]["dev_accuracy"])
    metrics = json.loads((out / layout.METRICS).read_text(encoding="utf-8"))
    assert {"soft", "hard"} <= set(metrics["step_terms"][0])

    from paddlenlp.transformers import AutoModelForSequenceClassification

    student = AutoModelForSequenceClassification.from_pretrained(str(out))
    assert student.config.num_hidden_layers == 3 and student.config.hidden_size == 128
    record = export_tiny(out, tmp_path / "student-export", formats=("onnx",))
    assert record["formats"]["onnx"]["parity"]["fit"]


def test_hidden_loss_and_init_from_teacher(tiny_checkpoint, tmp_path):
    import paddle

    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.training.distill import build_student

    ckpt, data = tiny_checkpoint
    teacher, _, meta = load_checkpoint(ckpt)
    student, source = build_student("2l-128h", teacher, ckpt, meta.labels, 128, init_from_teacher=True)
    assert source.init_layers == [0, 1]
    student.eval()  # dropout off, as the teacher is
    ids = paddle.to_tensor([[2, 10, 11, 3]])
    np.testing.assert_allclose(student(ids).numpy(), teacher(ids).numpy(), atol=1e-5)
    report = _distill(ckpt, data, tmp_path / "s", student="2l-128h", init_from_teacher=True, hidden_loss=True,
                      max_steps=6)
    terms = json.loads((tmp_path / "s" / layout.METRICS).read_text(encoding="utf-8"))["step_terms"]
    assert len(terms) == 6 and all(t["hidden"] >= 0 for t in terms)
    assert report["student"]["model"]["init_layers"] == [0, 1]
    assert layer_map(3, 12) == [(0, 0), (1, 4), (2, 8), (3, 12)]


def test_bad_inputs_are_one_line_errors(tiny_checkpoint, tmp_path):
    ckpt, data = tiny_checkpoint
    with pytest.raises(SentiError, match="not a senti checkpoint"):
        _distill(tmp_path, data, tmp_path / "a")
    emotions = write_folder(tmp_path / "emo", synthetic_rows(60, EMOTIONS), synthetic_rows(12, EMOTIONS))
    with pytest.raises(SentiError, match="teacher labels .* differ from the dataset's"):
        _distill(ckpt, emotions, tmp_path / "b")
    with pytest.raises(SentiError, match="--init-from-teacher needs a student no wider or deeper"):
        _distill(ckpt, data, tmp_path / "c", student="4l-256h", init_from_teacher=True)
    other = tmp_path / "other_vocab"
    shutil.copytree(ckpt, other)
    vocab = (other / "vocab.txt").read_text(encoding="utf-8").splitlines()
    vocab[10], vocab[11] = vocab[11], vocab[10]
    (other / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    with pytest.raises(SentiError, match="different vocabulary from the teacher's"):
        _distill(ckpt, data, tmp_path / "d", student=str(other))
    with pytest.raises(SentiError, match="alpha must be in"):
        DistillConfig(teacher="t", student="s", dataset="d", output_dir="o", alpha=2)


def test_eval_and_export_cut_the_splits_the_student_was_trained_on(tiny_checkpoint, tmp_path, monkeypatch):
    """A student distilled with --seed 3 on a seeded (single-file) dataset is evaluated and parity-checked on
    the splits cut with seed 3, never 42: its test rows cannot overlap its training rows."""
    from typer.testing import CliRunner

    import senti.toolkit.data.splits as data_module
    from senti.cli import app
    from tests.helpers import write_rows

    ckpt, _ = tiny_checkpoint
    reviews = write_rows(tmp_path / "reviews.tsv", synthetic_rows(300, seed=5))
    out = tmp_path / "student"
    _distill(ckpt, reviews, out, epochs=1, max_steps=4, seed=3)
    assert json.loads((out / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["data"]["seed"] == 3
    cuts = []
    real = data_module.load_splits

    def counted(dataset, **kw):
        cuts.append((dataset, kw["seed"]))
        return real(dataset, **kw)

    monkeypatch.setattr(data_module, "load_splits", counted)
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "--model", str(out), "--split", "test"])
    assert result.exit_code == 0, result.output
    scored = json.loads((out / layout.eval_results("test")).read_text(encoding="utf-8"))
    assert scored["data"]["seed"] == 3 and scored["dataset"] == str(reviews)
    result = runner.invoke(app, ["export", "--model", str(out), "--output-dir", str(tmp_path / "exported"),
                                 "--formats", "onnx"])
    assert result.exit_code == 0, result.output
    exported = json.loads((tmp_path / "exported" / layout.EXPORT_META).read_text(encoding="utf-8"))
    assert exported["data"]["seed"] == 3
    assert cuts and all(cut == (str(reviews), 3) for cut in cuts), cuts
    splits = real(str(reviews), seed=3)
    assert scored["n"] == len(splits.test) and exported["parity_texts"] == len(splits.dev)


def test_an_ngram_teacher_and_a_pretrained_student(tiny_checkpoint, tmp_path):
    """--teacher-ngram 1: the n-gram baseline alone is the teacher (its dev figure is the n-gram model's); a
    pretrained folder with the teacher's vocabulary is a student; a foreign vocabulary is refused."""
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.evaluation.baseline import baseline_figures
    from senti.toolkit.training.pretrain import PretrainConfig, run_pretraining

    ckpt, data = tiny_checkpoint
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(t for _, t in synthetic_rows(200, seed=4)), encoding="utf-8")
    pretrained = tmp_path / "pretrained"
    run_pretraining(PretrainConfig(output_dir=str(pretrained), corpus=[str(corpus)], model=str(ckpt), max_steps=2,
                                   batch_size=16, save_every=2, device="cpu"), say=lambda _: None)
    report = _distill(ckpt, data, tmp_path / "s", student=str(pretrained), teacher_ngram=1.0)
    splits = load_splits(str(data), seed=3)
    ngram = baseline_figures([e.text for e in splits.train], [e.label for e in splits.train], splits.labels,
                             {"dev": ([e.text for e in splits.dev], [e.label for e in splits.dev])}, seed=3)
    assert report["teacher"]["dev_accuracy"] == pytest.approx(ngram["dev"]["accuracy"])
    assert report["student"]["model"]["source"] == "pretrained"
    scratch = tmp_path / "scratch-pretrained"
    run_pretraining(PretrainConfig(output_dir=str(scratch), corpus=[str(corpus)], max_steps=1, batch_size=16,
                                   save_every=1, device="cpu", min_freq=3), say=lambda _: None)
    with pytest.raises(SentiError, match="different vocabulary"):
        _distill(ckpt, data, tmp_path / "s2", student=str(scratch))


def test_soft_loss_is_the_kl_at_temperature_scaled_by_its_square():
    """Hinton's soft term: KL(teacher || student) of the softened distributions, times T^2 so its gradients keep
    their size whatever the temperature."""
    import paddle

    from senti.toolkit.training.distill import LossInputs, soft_kl

    student = np.array([[2.0, -1.0, 0.5], [0.1, 0.3, -2.0]], dtype=np.float32)
    teacher = np.array([[1.0, 0.0, 2.0], [-1.0, 1.5, 0.0]], dtype=np.float32)

    def softmax(x):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    for temperature in (1.0, 2.0, 4.0):
        p_s, p_t = softmax(student / temperature), softmax(teacher / temperature)
        expected = (p_t * (np.log(p_t) - np.log(p_s))).sum(1).mean() * temperature**2
        got = float(soft_kl(LossInputs(paddle.to_tensor(student), paddle.to_tensor(teacher), None, temperature)))
        assert got == pytest.approx(expected, rel=1e-5)


def test_a_preset_student_pads_with_its_teachers_padding_id():
    """A 3l-128h student of an e5-small (XLM-R) teacher was built with padding id 0, which is `<s>` there: it
    masked every text's first token in training, and its export, padded with the tokenizer's `<pad>` (1) when
    served, failed the parity sample at load (max |logit diff| 1.14)."""
    from types import SimpleNamespace

    from senti.toolkit.training.distill import build_student

    for pad in (1, 0):
        teacher = SimpleNamespace(config=SimpleNamespace(vocab_size=120, ngram_buckets=0, pad_token_id=pad))
        student, _ = build_student("2l-128h", teacher, Path("unused"), ["negative", "positive"], 64, False)
        assert student.config.pad_token_id == pad
