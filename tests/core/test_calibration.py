"""senti.core.calibration: the temperature fitted by log-loss, the figures, the abstention threshold, the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from senti.core.artifacts import Abstention, Calibration, ExportMeta
from senti.core.calibration import (
    Target,
    accuracy_at_coverage,
    aurc,
    brier,
    calibrated_probabilities,
    choose_threshold,
    expected_calibration_error,
    fit_calibration,
    reliability_bins,
    risk_coverage,
)
from senti.core.errors import ArtifactError, SentiError


def under_confident(n: int = 2000, classes: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Logits whose softmax is right about 88% of the time while saying about 0.7: a model that needs sharpening."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, classes, n)
    z = rng.normal(0.0, 1.0, (n, classes))
    z[np.arange(n), gold] += 2.0
    return 0.3 * z, gold


def test_a_fitted_temperature_brings_an_under_confident_model_to_its_accuracy_and_keeps_every_answer():
    logits, gold = under_confident()
    dev, test = slice(0, 1000), slice(1000, None)
    fitted = fit_calibration(logits[dev], gold[dev])
    before = calibrated_probabilities(logits[test], None)
    after = calibrated_probabilities(logits[test], fitted)
    assert fitted.method == "temperature" and fitted.bias is None  # two classes: never a bias
    assert 0.1 < fitted.temperature < 0.7  # it sharpens
    assert expected_calibration_error(before, gold[test]) > 0.1
    assert expected_calibration_error(after, gold[test]) < 0.04  # on texts it was not fitted on
    assert (after.argmax(1) == before.argmax(1)).all()  # a temperature never changes which label wins
    assert fitted.log_loss_after is not None and fitted.log_loss_before is not None
    assert fitted.ece_after is not None and fitted.ece_before is not None
    assert fitted.log_loss_after < fitted.log_loss_before and fitted.ece_after < fitted.ece_before
    assert fitted.texts == 1000


def test_vector_scaling_is_kept_for_several_classes_only_where_it_predicts_dev_better():
    logits, gold = under_confident(3000, classes=3, seed=1)
    skewed = logits.copy()
    skewed[:, 2] += 1.5  # a class the model over-answers: a bias can undo it, a temperature cannot
    fitted = fit_calibration(skewed[:1500], gold[:1500])
    assert fitted.method == "vector" and fitted.bias is not None and fitted.bias[0] == 0.0 and fitted.bias[2] < -0.5
    plain = fit_calibration(logits[:1500], gold[:1500])
    assert plain.method == "temperature"  # nothing for a bias to fix: the margin keeps the simpler one
    scaled = calibrated_probabilities(skewed[1500:], fitted)
    assert expected_calibration_error(scaled, gold[1500:]) < 0.05


def test_a_dev_split_the_model_gets_all_right_still_gives_a_finite_temperature():
    """Hard targets drove the temperature to its lower bound (every answer 1.0) on a tiny model's synthetic dev."""
    gold = np.arange(400) % 2
    logits = np.where(np.eye(2)[gold] > 0, -0.05, -3.0)
    fitted = fit_calibration(logits, gold)
    top = calibrated_probabilities(logits, fitted).max(1)
    assert 0.05 < fitted.temperature and top.max() < 0.999


def test_the_figures_agree_with_their_definitions():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
    gold = np.array([0, 1, 1, 0])  # right, wrong, right, wrong
    assert brier(probs, gold) == pytest.approx(np.mean([0.02, 1.28, 0.18, 0.72]))
    bins = reliability_bins(probs, gold, bins=2)
    assert [b.texts for b in bins] == [2, 2]
    # by confidence: 0.6 wrong, 0.7 right | 0.8 wrong, 0.9 right
    assert expected_calibration_error(probs, gold, bins=2) == pytest.approx(0.5 * abs(0.65 - 0.5) + 0.5 * abs(0.85 - 0.5))
    coverage, risk = risk_coverage(probs, gold)
    assert coverage.tolist() == [0.25, 0.5, 0.75, 1.0] and risk.tolist() == [0.0, 0.5, 1 / 3, 0.5]
    assert aurc(probs, gold) == pytest.approx(np.mean([0.0, 0.5, 1 / 3, 0.5]))
    assert accuracy_at_coverage(probs, gold, 0.5) == 0.5 and accuracy_at_coverage(probs, gold, 0.25) == 1.0
    width = reliability_bins(probs, gold, bins=10, mass=False)
    assert sum(b.texts for b in width) == 4 and all(b.lower <= b.upper for b in width)


def test_a_threshold_for_a_precision_answers_the_most_texts_that_reach_it():
    rng = np.random.default_rng(3)
    confidence = np.sort(rng.uniform(0.5, 1.0, 1000))[::-1]
    right = rng.uniform(size=1000) < confidence  # a calibrated model: right as often as it says
    gold = np.where(right, 0, 1)
    probs = np.stack([confidence, 1 - confidence], axis=1)
    chosen = choose_threshold(probs, gold, Target.parse("precision=0.9"))
    answered = confidence >= chosen.threshold
    assert chosen.dev_precision >= 0.9 and right[answered].mean() == pytest.approx(chosen.dev_precision)
    assert chosen.dev_coverage == pytest.approx(answered.mean())
    lower = confidence[~answered].max()  # answering one more confidence level falls below the target
    assert right[confidence >= lower].mean() < 0.9
    by_share = choose_threshold(probs, gold, Target.parse("coverage=0.75"))
    assert by_share.dev_coverage == pytest.approx(0.75) and by_share.target == "coverage=0.75"


@pytest.mark.parametrize("text,message", [
    ("precision=1.0", "--abstain precision must be in (0.5, 1); got 1"),
    ("precision=0.5", "--abstain precision must be in (0.5, 1); got 0.5"),
    ("coverage=0", "--abstain coverage must be in (0, 1]; got 0"),
    ("coverage=1.2", "--abstain coverage must be in (0, 1]; got 1.2"),
    ("recall=0.9", "--abstain takes precision=P or coverage=C"),
    ("precision=high", "--abstain takes precision=P or coverage=C"),
])
def test_bad_abstention_targets_are_refused_in_one_line(text, message):
    with pytest.raises(SentiError) as err:
        Target.parse(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_too_few_dev_texts_are_refused_saying_how_many_there_are_and_how_many_are_needed():
    logits, gold = under_confident(250)
    with pytest.raises(SentiError, match="needs at least 167 labelled dev texts; the dev split has 150"):
        choose_threshold(calibrated_probabilities(logits[:150], None), gold[:150], Target.parse("precision=0.97"))
    with pytest.raises(SentiError, match="calibration needs at least 100 labelled dev texts; got 40"):
        fit_calibration(logits[:40], gold[:40])


def _export_meta(**changes) -> dict:
    meta = {"meta_version": 1, "labels": ["negative", "positive"], "max_seq_len": 32,
            "tokenizer": {"vocab_file": "vocab.txt", "do_lower_case": True, "unk_token": "[UNK]", "cls_token": "[CLS]",
                          "sep_token": "[SEP]", "pad_token": "[PAD]"},
            "formats": {}, "model": {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1,
                                     "intermediate_size": 8, "vocab_size": 10}}
    meta.update(changes)
    return meta


@pytest.mark.parametrize("changes,message", [
    ({"calibration": {"temperature": 0}}, "calibration temperature must be a positive finite number; got 0"),
    ({"calibration": {"temperature": -1.5}}, "temperature must be a positive finite number; got -1.5"),
    ({"calibration": {"temperature": "hot"}}, "temperature must be a positive finite number; got 'hot'"),
    ({"calibration": {"temperature": float("inf")}}, "temperature must be a positive finite number; got inf"),
    ({"calibration": {"temperature": 1.0, "bias": [0.0]}}, "calibration bias must be 2 finite numbers"),
    ({"abstain": {"threshold": 1.5, "target": "precision=0.97", "texts": 1, "dev_coverage": 1, "dev_precision": 1}},
     "abstention threshold must be a number in [0, 1]; got 1.5"),
    ({"abstain": {"threshold": None, "target": "precision=0.97", "texts": 1, "dev_coverage": 1, "dev_precision": 1}},
     "abstention threshold must be a number in [0, 1]; got None"),
])
def test_export_metadata_with_an_impossible_temperature_or_threshold_is_refused_at_load(changes, message):
    with pytest.raises(ArtifactError) as err:
        ExportMeta.from_json(_export_meta(**changes), "export.json")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_export_metadata_keeps_a_valid_calibration_and_threshold():
    meta = ExportMeta.from_json(_export_meta(calibration={"temperature": 0.4, "texts": 1200},
                                             abstain={"threshold": 0.93, "target": "precision=0.97", "texts": 1200,
                                                      "dev_coverage": 0.9, "dev_precision": 0.97}), "export.json")
    assert isinstance(meta.calibration, Calibration) and meta.calibration.temperature == 0.4
    assert isinstance(meta.abstain, Abstention) and meta.abstain.threshold == 0.93
    again = ExportMeta.from_json(meta.to_json(), "export.json")
    assert again.calibration == meta.calibration and again.abstain == meta.abstain


def test_vector_scaling_is_refused_where_its_biases_would_cost_the_rare_class_its_answers():
    """Biases fitted for log-loss pulled a six-class model's answers back toward the common classes (3 points of
    macro-F1 lost on SMP2020 test): where the biases lower dev macro-F1, the temperature alone is kept."""
    from senti.core.calibration import _fit_parameters
    from senti.core.scores import confusion_matrix, macro_f1

    rows = [([2.0, 0.0, 0.0], 0)] * 200 + [([0.0, 2.0, 0.0], 1)] * 100
    rows += [([0.3, 0.0, 0.5], 2)] * 20 + [([0.3, 0.0, 0.5], 0)] * 40  # the rare class, told apart only by its offset
    logits = np.array([r for r, _ in rows])
    gold = np.array([g for _, g in rows])
    t, bias = _fit_parameters(logits, gold, "vector")
    moved = calibrated_probabilities(logits, Calibration(t, bias, "vector")).argmax(1)
    assert macro_f1(confusion_matrix(gold, moved, 3)) < macro_f1(confusion_matrix(gold, logits.argmax(1), 3))
    fitted = fit_calibration(logits, gold)
    assert fitted.method == "temperature" and fitted.bias is None
    assert (calibrated_probabilities(logits, fitted).argmax(1) == logits.argmax(1)).all()
