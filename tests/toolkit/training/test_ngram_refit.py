"""`senti train --model PARENT --ngram-init fit --replay OLD --unlabeled POOL`: the parent's n-gram table plus a
change fitted on the old rows, the new labels and the pool as the parent answers it (toolkit.training.ngram_fit)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from senti.core.errors import SentiError
from tests.helpers import CUES, synthetic_rows, write_folder

# A new shop's own words, which the parent never read as words (their characters are the filler's, which it has
# read, so its vocabulary holds them): in the pool each comes beside a cue the parent knows
NEW_WORDS = {"positive": ["包装颜色内容"], "negative": ["书本屏幕价格"]}


def test_fit_change_moves_the_table_only_where_the_rows_are_and_less_under_a_stronger_pull():
    import scipy.sparse as sp

    from senti.toolkit.training.ngram_fit import fit_change

    x = sp.csr_matrix(np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [1.0, 0, 0, 0], [0, 1.0, 0, 0]]))
    y = np.array([1, 0, 1, 0])
    offset = np.zeros((4, 2))  # the parent says nothing on these rows
    free, held = fit_change(x, y, offset, c=100.0), fit_change(x, y, offset, c=0.01)
    assert ((x @ free).argmax(1) == y).all()  # it learned the rows
    assert not free[2:].any()  # buckets no row holds are left as they were
    assert np.abs(held).max() < 0.1 * np.abs(free).max()  # C small: the change stays near zero
    agreeing = fit_change(x, y, np.array([[-5.0, 5.0], [5.0, -5.0]] * 2), c=100.0)
    assert np.abs(agreeing).max() < 0.1 * np.abs(free).max()  # a parent already right needs little change


def _new_shop(tmp_path):
    """(new data folder: a few rows with the old cues, dev in the new words alone; the pool: old cue + new word)."""
    new = write_folder(tmp_path / "few", synthetic_rows(8, seed=61), synthetic_rows(32, NEW_WORDS, seed=62),
                       synthetic_rows(32, NEW_WORDS, seed=63))
    both = {label: [f"{cue}，{word}" for cue in CUES[label] for word in NEW_WORDS[label]] for label in CUES}
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(t for _, t in synthetic_rows(300, both, seed=64)) + "\n", encoding="utf-8")
    return new, pool


def _unsure_ngram_side(checkpoint) -> None:
    """The parent's n-gram table shrunk fifty times: its ERNIE side reads the cues, its n-gram side is unsure (a
    pretrained parent on a new shop: the encoder knows the words, the table learned on the old data does not)."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    path = checkpoint / "model.safetensors"
    with safe_open(str(path), framework="np") as f:
        metadata, weights = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    weights["ngram_table.weight"] = weights["ngram_table.weight"] / 50
    save_file(weights, str(path), metadata=metadata)


def test_the_pool_teaches_the_refitted_ngram_side_a_new_shops_words(tiny_checkpoint, tmp_path):
    """The parent answers the pool by the cues it knows; the change fitted on the pool (over the parent's own
    n-gram logits, which are unsure) learns the new words beside them, so the child's n-gram side reads texts holding
    only the new words, which the parent cannot. The parent is scored first at its own table and weight; the
    refitted side's weight is chosen by dev log-loss."""
    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.evaluation.evaluate import predict_logits
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    ckpt, data = tiny_checkpoint
    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    config["ngram_weight"] = 0.37  # on no grid: only the parent's own weight can give it
    (ckpt / "config.json").write_text(json.dumps(config), encoding="utf-8")
    _unsure_ngram_side(ckpt)
    new, pool = _new_shop(tmp_path)

    def child(name: str, **options) -> dict:
        said: list[str] = []
        settings = dict(model=str(ckpt), dataset=str(new), output_dir=str(tmp_path / name), replay=str(data),
                        ngram_init="fit", interpolate="off", epochs=1, batch_size=16, lr=1e-3, device="cpu", seed=7)
        metrics = run_training(TrainConfig(**{**settings, **options}), say=said.append).to_json()
        return {"metrics": metrics, "said": said}

    taught, untaught = child("taught", unlabeled=str(pool), unlabeled_max=40), child("untaught")
    fit = taught["metrics"]["data"]["ngram_fit"]
    assert (fit["old_rows"], fit["new_rows"], fit["pool_rows"]) == (600, 8, 160)  # 4 x 40 pool texts scored
    assert untaught["metrics"]["data"]["ngram_fit"]["pool_rows"] == 0
    parent = taught["metrics"]["evaluations"][0]
    assert parent["parent"] and parent["ngram_weight"] == 0.37 and parent["dev_accuracy"] <= 0.75
    assert all(e["ngram_weight"] != 0.37 for e in taught["metrics"]["evaluations"][1:])
    assert any("chosen by dev log-loss" in line for line in taught["said"])

    def ngram_side_reads(folder) -> float:
        """The n-gram side's accuracy alone on texts that hold only the new words."""
        rows = synthetic_rows(64, NEW_WORDS, seed=65)
        model, tokenizer, meta = load_checkpoint(folder)
        _, wide = predict_logits(model, encode_texts(tokenizer, [t for _, t in rows], meta.max_seq_len)[0], parts=True)
        return float((wide.argmax(1) == np.array([meta.labels.index(label) for label, _ in rows])).mean())

    assert ngram_side_reads(tmp_path / "taught") > 0.9 > ngram_side_reads(tmp_path / "untaught") + 0.2


def test_refitting_a_checkpoints_ngram_side_needs_the_old_data(tiny_checkpoint, tmp_path):
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    ckpt, _ = tiny_checkpoint
    new, _ = _new_shop(tmp_path)
    with pytest.raises(SentiError, match="--ngram-init fit on a checkpoint refits its n-gram head on the old data"):
        run_training(TrainConfig(model=str(ckpt), dataset=str(new), output_dir=str(tmp_path / "c"), ngram_init="fit",
                                 epochs=1, device="cpu"), say=lambda _: None)
