"""Calibration from training to `senti eval` and `senti export`: the temperature fitted on dev after training
(kept from the parent, or refitted, in a continuation), --no-calibrate, the figures and plots of `senti eval`, and the
one-line refusals of --abstain."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from senti.core import layout
from senti.core.calibration import fit_calibration
from senti.toolkit.evaluation.calibrate import dev_scores
from tests.helpers import synthetic_rows, train_tiny, write_folder


def _meta(folder) -> dict:
    return json.loads((folder / layout.CHECKPOINT_META).read_text(encoding="utf-8"))


def test_training_records_the_temperature_dev_fits_and_no_calibrate_keeps_the_softmax(tiny_checkpoint, tmp_path):
    ckpt, data = tiny_checkpoint
    calibration = _meta(ckpt)["calibration"]
    logits, gold = dev_scores(ckpt)
    assert calibration["texts"] == len(gold) == 120 and calibration["fitted_on"] == "dev"
    refit = fit_calibration(logits, gold)  # what senti.json holds is the fit on the checkpoint's own dev scores
    assert calibration["temperature"] == pytest.approx(refit.temperature, rel=1e-6)
    assert calibration["ece_after"] <= calibration["ece_before"] and calibration["log_loss_after"] < \
        calibration["log_loss_before"]
    train_tiny(tmp_path / "plain", data, epochs=1, calibrate=False)
    assert _meta(tmp_path / "plain")["calibration"] is None


def test_a_continuation_keeps_its_parents_temperature_on_a_few_dev_labels_and_refits_on_enough(tiny_checkpoint,
                                                                                             tmp_path):
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    ckpt, _ = tiny_checkpoint
    parent = _meta(ckpt)["calibration"]
    for name, dev_rows, kept in (("few", 40, True), ("many", 150, False)):
        new = write_folder(tmp_path / f"{name}-data", synthetic_rows(96, seed=81), synthetic_rows(dev_rows, seed=82))
        said: list[str] = []
        run_training(TrainConfig(model=str(ckpt), dataset=str(new), output_dir=str(tmp_path / name), epochs=1,
                                 batch_size=16, lr=1e-3, device="cpu", seed=7), say=said.append)
        child = _meta(tmp_path / name)["calibration"]
        line = next(s for s in said if s.startswith("calibration:"))
        if kept:
            assert child == parent
            assert f"{dev_rows} dev texts, fewer than the 100 a temperature needs; kept the parent's temperature" in line
        else:
            assert child["texts"] == dev_rows and child["temperature"] != parent["temperature"]
            assert "refitted on the new dev labels" in line


def test_senti_eval_shows_calibration_beside_accuracy_and_draws_it(tiny_checkpoint, tmp_path):
    ckpt, data = tiny_checkpoint
    done = subprocess.run([sys.executable, "-m", "senti.cli", "eval", "--model", str(ckpt), "--split", "test"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "calibration on these 120 texts" in done.stdout and "n-gram baseline" in done.stdout
    assert "model, calibrated (T=" in done.stdout and "accuracy on the most confident 80% / 90% / 95%" in done.stdout
    record = json.loads((ckpt / layout.eval_results("test")).read_text(encoding="utf-8"))
    c = record["calibration"]
    assert c["temperature"] == _meta(ckpt)["calibration"]["temperature"]
    assert c["raw"]["texts"] == c["calibrated"]["texts"] == 120
    assert c["calibrated"]["ece"] < c["raw"]["ece"]  # the test split, which the temperature never saw
    assert c["calibrated"]["accuracy"] == record["accuracy"]  # a temperature changes no answer
    assert record["baseline"]["scored"]["calibration"]["texts"] == 120
    for kind in ("calibration", "risk_coverage"):
        png = ckpt / layout.eval_plot(layout.eval_results("test"), kind)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # several domains: a calibration row per domain beside the accuracy table
    done = subprocess.run([sys.executable, "-m", "senti.cli", "eval", "--model", str(ckpt), "--split", "test",
                           "--dataset", str(data), "--dataset", str(data / "test.tsv")], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "calibration per domain" in done.stdout
    report = json.loads((ckpt / layout.eval_domains("test")).read_text(encoding="utf-8"))
    assert all(d["calibration"]["calibrated"]["texts"] == d["n"] for d in report["domains"].values())


@pytest.mark.parametrize("option,message", [
    ("precision=1.2", "--abstain precision must be in (0.5, 1); got 1.2"),
    ("coverage=0", "--abstain coverage must be in (0, 1]; got 0"),
    ("precision=0.99", "--abstain precision=0.99: an abstention threshold for precision=0.99 needs at least 500 "
                       "labelled dev texts; the dev split has 120"),
])
def test_export_refuses_an_abstention_target_it_cannot_choose_in_one_line(tiny_checkpoint, tmp_path, option, message):
    ckpt, _ = tiny_checkpoint
    done = subprocess.run([sys.executable, "-m", "senti.cli", "export", "--model", str(ckpt), "--output-dir",
                           str(tmp_path / "out"), "--formats", "onnx", "--abstain", option], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().count("\n") == 0 and not (tmp_path / "out").exists()


def test_the_dev_chosen_threshold_holds_on_the_test_split_of_a_calibrated_export(tiny_checkpoint, tmp_path):
    from senti.export.pipeline import ExportConfig
    from senti.toolkit.training.exporting import export_checkpoint

    ckpt, _ = tiny_checkpoint
    record = export_checkpoint(ExportConfig(model=str(ckpt), output_dir=str(tmp_path / "out"), formats=("onnx",),
                                            abstain="coverage=0.9"), say=lambda _: None)
    assert record.abstain is not None and record.abstain.texts == 120  # the whole dev split, not a sample
    assert record.calibration is not None and record.calibration.temperature == _meta(ckpt)["calibration"][
        "temperature"]
    from senti.toolkit.evaluation.evaluate import evaluate_model

    result = evaluate_model(tmp_path / "out", split="test", baseline=False)
    a = result.calibration.abstain
    assert a.threshold == record.abstain.threshold and 0.7 <= a.coverage <= 1.0


def test_aspect_heads_share_one_fit_and_every_head_answers_its_calibrated_probabilities(tmp_path):
    """One temperature (and per-polarity biases where they measure better) over every labelled dev pair, repeated for
    each head: the export answers each head's four outputs as softmax(logits / T + b) within the head."""
    from senti.core.aspects import ASPECT_POLARITIES, Aspect, head_aspects
    from senti.core.calibration import scaled_logits
    from senti.serving import Predictor
    from senti.toolkit.evaluation.calibrate import head_dev_scores
    from tests.helpers import train_aspect_heads

    _, ckpt, export, _ = train_aspect_heads(tmp_path)
    calibration = _meta(ckpt)["calibration"]
    names = head_aspects(_meta(ckpt)["labels"])
    assert names is not None
    logits, gold = head_dev_scores(ckpt, names)
    assert calibration is not None and calibration["texts"] == len(gold) >= 100  # 60 dev texts x their aspects
    assert calibration["bias"] is None or len(calibration["bias"]) == 4 * len(names)
    predictor = Predictor.load(export, backend="onnx")
    assert predictor.calibration is not None and predictor.calibration.temperature == calibration["temperature"]
    texts = ["服务很好，菜很难吃。", "环境一般。"]
    raw = predictor.logits(texts)[0]
    want = np.exp(scaled_logits(raw, predictor.calibration).reshape(2, len(names), 4))
    want /= want.sum(-1, keepdims=True)
    answers = predictor.aspects(texts, [Aspect(n, ()) for n in names])
    for i, row in enumerate(answers):
        for j, name in enumerate(names):
            assert row[name].polarity == ASPECT_POLARITIES[int(want[i, j].argmax())]
            if row[name].score is not None:  # P(positive) among the head's four outputs
                assert row[name].score == pytest.approx(want[i, j, 0], abs=1e-6)
