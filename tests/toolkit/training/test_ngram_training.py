"""Training with the n-gram head beside ERNIE: two losses, the dev-chosen weight, continuing, distilling, export
and serving with the head and its class offsets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import EMOTIONS, export_tiny, synthetic_rows, train_tiny, write_folder

BUCKETS = 1009


@pytest.fixture(scope="module")
def two_sided(tmp_path_factory):
    root = tmp_path_factory.mktemp("ngram")
    data = write_folder(root / "data", synthetic_rows(600, seed=1), synthetic_rows(120, seed=2),
                        synthetic_rows(120, seed=3))
    metrics = train_tiny(root / "checkpoint", data, ngram_buckets=BUCKETS)
    return root / "checkpoint", data, metrics


def test_training_learns_both_sides_and_records_the_dev_weight(two_sided):
    from senti.core.checkpoint import load_checkpoint
    from senti.core.ngram_head import WEIGHT_GRID

    checkpoint, _, metrics = two_sided
    best = metrics["best"]
    assert best["ngram_weight"] in WEIGHT_GRID
    assert best["dev_accuracy_ngram"] > 0.8  # the synthetic reviews are word-coded: n-grams alone read them
    assert {"ernie", "ngram"} <= set(metrics["step_terms"][-1])
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    assert config["ngram_buckets"] == BUCKETS and config["ngram_weight"] == best["ngram_weight"]
    model, _, _ = load_checkpoint(checkpoint)
    assert type(model).__name__ == "ErnieWithNgrams"
    assert float(np.abs(model.ngram_table.weight.numpy()).max()) > 0  # the loaded table is the trained one


def test_the_head_survives_export_and_answers_the_same_everywhere(two_sided, tmp_path):
    from senti.serving.predictor import Predictor

    checkpoint, _, _ = two_sided
    record = export_tiny(checkpoint, tmp_path / "export", quantize="int8")
    for fmt in ("paddle", "onnx", "onnx-opt"):
        parity = record["formats"][fmt]["parity"]
        assert parity["fit"] and parity["max_abs_logit_diff"] < 1e-4 and parity["label_agreement"] == 1.0, fmt
    texts = [t for _, t in synthetic_rows(40, seed=5)]
    answers = {b: Predictor.load(tmp_path / "export", backend=b).predict(texts) for b in ("paddle", "onnx")}
    assert [a.label for a in answers["paddle"]] == [a.label for a in answers["onnx"]]


def test_a_continued_checkpoint_keeps_its_head(two_sided, tmp_path):
    checkpoint, data, _ = two_sided
    train_tiny(tmp_path / "continued", data, model=str(checkpoint), epochs=1)
    config = json.loads((tmp_path / "continued" / "config.json").read_text(encoding="utf-8"))
    assert config["ngram_buckets"] == BUCKETS


def test_a_distilled_student_gets_the_head_and_learns_both_sides(two_sided, tmp_path):
    from senti.toolkit.training.config import DistillConfig
    from senti.toolkit.training.distill import run_distillation

    checkpoint, data, _ = two_sided
    report = run_distillation(DistillConfig(
        teacher=str(checkpoint), student="3l-128h", dataset=str(data), output_dir=str(tmp_path / "student"),
        epochs=1, batch_size=16, lr=1e-3, device="cpu", seed=7, ngram_buckets=BUCKETS), say=lambda _: None)
    assert report is not None
    config = json.loads((tmp_path / "student" / "config.json").read_text(encoding="utf-8"))
    assert config["ngram_buckets"] == BUCKETS
    metrics = json.loads((tmp_path / "student" / "metrics.json").read_text(encoding="utf-8"))
    assert {"soft", "hard", "soft_ngram", "hard_ngram"} <= set(metrics["step_terms"][-1])
    assert report.student.dev_accuracy > 0.5


def test_the_hidden_loss_is_refused_with_the_head_in_one_line():
    from senti.core.errors import SentiError
    from senti.toolkit.training.config import DistillConfig

    with pytest.raises(SentiError, match="hidden-state loss needs a student without the n-gram head"):
        DistillConfig(teacher="t", dataset="d", output_dir="o", hidden_loss=True, ngram_buckets=BUCKETS)


def test_the_keys_are_the_same_in_onnx_for_a_real_vocabulary_size(tmp_path):
    """With a 5,562-token vocabulary trigram keys pass 2^24: multiplying by a Python int became Paddle's `scale`
    op, which paddle2onnx computes in float32, and ONNX answered differently from the dynamic graph."""
    import onnxruntime as ort
    import paddle
    from paddle.static import InputSpec

    from senti.core.ngram_head import DEFAULT_BUCKETS, ngram_keys

    class Keys(paddle.nn.Layer):
        def forward(self, input_ids):
            return paddle.concat([key for key, _ in ngram_keys(input_ids, 5562, DEFAULT_BUCKETS, 0)], axis=1)

    ids = np.random.default_rng(0).integers(1, 5562, size=(3, 40)).astype("int64")
    expected = Keys()(paddle.to_tensor(ids)).numpy()
    paddle.onnx.export(Keys(), str(tmp_path / "keys"), input_spec=[InputSpec([None, None], "int64", "input_ids")],
                       opset_version=14)
    session = ort.InferenceSession(str(tmp_path / "keys.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: ids})[0]
    assert (got == expected).all(), int((got != expected).sum())


def test_three_classes_choose_the_adjustment_on_dev_and_export_it(tmp_path):
    from senti.core.ngram_head import TAU_GRID

    three = {k: EMOTIONS[k] for k in ("anger", "joy", "surprise")}
    unbalanced = [r for i, r in enumerate(synthetic_rows(900, three, seed=1)) if r[0] != "surprise" or i % 5 == 0]
    data = write_folder(tmp_path / "data", unbalanced, synthetic_rows(150, three, seed=2),
                        synthetic_rows(150, three, seed=3))
    metrics = train_tiny(tmp_path / "three", data, ngram_buckets=BUCKETS, epochs=1)
    best = metrics["best"]
    assert best["logit_adjustment_tau"] in TAU_GRID  # auto: chosen for more than two labels
    config = json.loads((tmp_path / "three" / "config.json").read_text(encoding="utf-8"))
    assert (config.get("class_offsets") is None) == (best["logit_adjustment_tau"] == 0.0)
    off = train_tiny(tmp_path / "off", data, ngram_buckets=BUCKETS, epochs=1, logit_adjustment="off")
    assert "logit_adjustment_tau" not in off["best"]
    said: list[str] = []  # without the n-gram head, auto was off without a word
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    run_training(TrainConfig(model="scratch:tiny", dataset=str(data), output_dir=str(tmp_path / "plain"), epochs=1,
                             batch_size=16, device="cpu", ngram_buckets=0, max_steps=2), say=said.append)
    assert any("logit adjustment is off for these 3 labels: it needs the n-gram head" in line for line in said)


def test_class_offsets_shift_every_format_s_answer(two_sided, tmp_path):
    import shutil

    from senti.serving.predictor import Predictor

    checkpoint, _, metrics = two_sided
    assert "logit_adjustment_tau" not in metrics["best"]  # two labels: auto leaves it off
    shifted = tmp_path / "shifted-checkpoint"
    shutil.copytree(checkpoint, shifted)
    config = json.loads((shifted / "config.json").read_text(encoding="utf-8"))
    assert config.get("class_offsets") is None
    config["class_offsets"] = [0.0, 0.75]
    (shifted / "config.json").write_text(json.dumps(config), encoding="utf-8")
    texts = [t for _, t in synthetic_rows(30, seed=6)]
    for name, folder in (("plain", checkpoint), ("shifted", shifted)):
        export_tiny(folder, tmp_path / f"{name}-export", calibrate=False)  # the graph's own offsets
    for backend in ("paddle", "onnx"):
        plain, moved = (Predictor.load(tmp_path / f"{n}-export", backend=backend).predict(texts)
                        for n in ("plain", "shifted"))
        labels = list(plain[0].probabilities)
        for a, b in zip(plain, moved):
            gap = [np.log(p.probabilities[labels[1]] / p.probabilities[labels[0]]) for p in (a, b)]
            assert gap[1] - gap[0] == pytest.approx(0.75, abs=1e-3), backend


def test_a_model_config_with_bad_class_offsets_is_refused_in_one_line():
    from senti.core.errors import ArtifactError
    from senti.core.untrusted import check_model_config

    for bad in ([0.0], [0.0, float("nan")], "0,1", [0.0, 1e9], [True, 0.0]):
        with pytest.raises(ArtifactError, match="class_offsets must be a list"):
            check_model_config({"num_labels": 2, "class_offsets": bad}, "m/config.json")
    check_model_config({"num_labels": 2, "class_offsets": [0.0, -1.5]}, "m/config.json")


def test_a_fitted_ngram_side_starts_at_the_linear_models_level_and_is_held(tmp_path):
    """--ngram-init fit: scikit-learn fits the head on the very n-grams it reads (C chosen on dev) and it stays as
    fitted while ERNIE trains; the dev-chosen weight keeps the model at least as good on dev as that side alone."""
    import paddle

    from senti.core.checkpoint import load_checkpoint

    data = write_folder(tmp_path / "d", synthetic_rows(300, seed=1), synthetic_rows(60, seed=2))
    metrics = train_tiny(tmp_path / "c", data, ngram_buckets=BUCKETS, ngram_init="fit", epochs=1, max_steps=4)
    fitted = metrics["data"]["ngram_fit"]
    assert fitted["C"] in (10.0, 30.0, 100.0) and fitted["dev_accuracy"] > 0.9
    assert metrics["best"]["dev_accuracy"] >= fitted["dev_accuracy"]
    model, _, _ = load_checkpoint(tmp_path / "c")
    assert float(paddle.abs(model.ngram_table.weight).sum()) > 0  # not the zero start
    with pytest.raises(Exception, match="refits its n-gram head on the old data too"):
        train_tiny(tmp_path / "e", data, model=str(tmp_path / "c"), ngram_init="fit", max_steps=1)
