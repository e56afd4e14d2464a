"""A few labels of a new domain: self-training on its unlabelled texts (`senti train --unlabeled POOL`) and the
parent's n-gram weight kept when the new dev set is too small to choose it again."""

from __future__ import annotations

import json

import numpy as np
import pytest

from senti.core import layout
from senti.core.errors import SentiError
from tests.helpers import synthetic_rows, train_tiny, write_folder


def test_confident_rows_take_an_equal_share_of_each_class_above_the_threshold():
    from senti.toolkit.training.self_training import confident_rows

    probs = np.array([[0.99, 0.01], [0.98, 0.02], [0.97, 0.03], [0.96, 0.04], [0.2, 0.8], [0.05, 0.95],
                      [0.6, 0.4], [0.5, 0.5]])
    # two each, but one class has a single answer above 0.9: what it cannot fill goes to the other's next best
    assert confident_rows(probs, 0.9, 4) == [0, 1, 2, 5]
    assert confident_rows(probs, 0.9, 6) == [0, 1, 2, 3, 5]
    assert confident_rows(probs, 0.75, 2) == [0, 5]
    assert confident_rows(probs, 0.9, 0) == []
    assert confident_rows(probs, 1.0, 4) == []


def test_unlabeled_pool_is_labelled_by_the_parent_and_never_holds_a_text_of_the_new_splits(tiny_checkpoint,
                                                                                          tmp_path):
    ckpt, _ = tiny_checkpoint  # a tiny model answers these at 0.65 to 0.75
    train, dev = synthetic_rows(32, seed=81), synthetic_rows(32, seed=82)
    new = write_folder(tmp_path / "few", train, dev)
    pool_rows = synthetic_rows(300, seed=83)
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join([t for _, t in pool_rows] + [t for _, t in dev[:10]] + ["", "  "]) + "\n",
                    encoding="utf-8")
    said: list[str] = []
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    metrics = run_training(TrainConfig(model=str(ckpt), dataset=str(new), output_dir=str(tmp_path / "child"),
                                       epochs=1, batch_size=16, lr=1e-3, device="cpu", seed=7, unlabeled=str(pool),
                                       unlabeled_max=40, unlabeled_confidence=0.6), say=said.append).to_json()
    record = metrics["data"]["unlabeled"]
    assert record["read"] == 312 and record["used"] == 160 and record["kept"] == 40  # 4 scored per row kept
    assert record["per_label"] == {"negative": 20, "positive": 20}
    assert metrics["data"]["rows"]["train"] == 32 and any("40 labelled by the parent" in line for line in said)
    hashes = np.load(tmp_path / "child" / layout.TRAIN_TEXT_HASHES)
    from senti.toolkit.data.seen import hashes_of

    assert not np.isin(hashes_of([t for _, t in dev]), hashes).any()  # no dev text was trained on


def test_unlabeled_needs_a_parent_checkpoint(binary_folder, tmp_path):
    pool = tmp_path / "pool.txt"
    pool.write_text("很满意\n", encoding="utf-8")
    with pytest.raises(SentiError, match="--unlabeled needs --model to be a senti checkpoint"):
        train_tiny(tmp_path / "out", binary_folder, unlabeled=str(pool))


def test_a_dev_set_too_small_to_choose_keeps_the_parents_ngram_weight(tiny_checkpoint, tmp_path):
    """With 32 new dev labels the n-gram weight was chosen again from the grid, for the parent's own figure too (a
    child 4.8 points worse on the domain's test passed the old-dev guard that way); now the parent's weight holds."""
    ckpt, _ = tiny_checkpoint
    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    config["ngram_weight"] = 0.37  # on no grid: only the parent's own weight can give it
    (ckpt / "config.json").write_text(json.dumps(config), encoding="utf-8")
    new = write_folder(tmp_path / "few", synthetic_rows(48, seed=91), synthetic_rows(32, seed=92))
    said: list[str] = []
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    metrics = run_training(TrainConfig(model=str(ckpt), dataset=str(new), output_dir=str(tmp_path / "child"),
                                       epochs=1, batch_size=16, lr=1e-3, device="cpu", seed=7), say=said.append).to_json()
    assert {e["ngram_weight"] for e in metrics["evaluations"]} == {0.37}
    assert json.loads((tmp_path / "child" / "config.json").read_text(encoding="utf-8"))["ngram_weight"] == 0.37
    assert any("n-gram weight 0.37 is kept" in line for line in said)
