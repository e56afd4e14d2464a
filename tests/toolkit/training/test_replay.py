"""Continuing a checkpoint (`senti train --model CHECKPOINT --replay`): the label set kept, lineage recorded,
the parent's held-out texts never replayed, its sequence length kept."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from senti.core import layout
from senti.core.artifacts import SplitRecipe
from senti.core.errors import SentiError
from tests.helpers import (
    EMOTIONS,
    synthetic_rows,
    train_tiny,
    write_folder,
    write_rows,
)


def test_replay_keeps_the_label_set_records_lineage_and_refuses_new_labels(tiny_checkpoint, tmp_path):
    ckpt, old_data = tiny_checkpoint
    new = write_folder(tmp_path / "new", synthetic_rows(80, seed=51), synthetic_rows(20, seed=52))
    metrics = train_tiny(tmp_path / "continued", new, model=str(ckpt), replay=str(old_data), replay_ratio=2.0,
                         epochs=1)
    assert metrics["data"]["replayed_rows"] == 160
    meta = json.loads((tmp_path / "continued" / layout.CHECKPOINT_META).read_text(encoding="utf-8"))
    assert meta["labels"] == ["negative", "positive"]
    assert meta["lineage"]["parent"] == str(ckpt.resolve()) and meta["lineage"]["replay"] == str(old_data)
    assert meta["lineage"]["replayed_rows"] == 160 and len(meta["lineage"]["parent_version"]) == 12
    emotions = write_folder(tmp_path / "emo", synthetic_rows(60, EMOTIONS), synthetic_rows(12, EMOTIONS))
    with pytest.raises(SentiError, match="label\\(s\\) anger, disgust, fear, joy, sadness, surprise are not among"):
        train_tiny(tmp_path / "bad", emotions, model=str(ckpt))


def test_replay_finds_the_parents_data_by_content_and_never_replays_its_held_out_rows(tmp_path, monkeypatch):
    from senti.toolkit.data.splits import load_recipe, load_splits
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.models import parent_meta
    from senti.toolkit.training.train import continuation

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    write_rows(tmp_path / "data" / "one.tsv", synthetic_rows(300, seed=61))
    train_tiny(tmp_path / "parent", Path("data/one.tsv"), epochs=1, seed=3)
    parent = json.loads((tmp_path / "parent" / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["data"]
    held = {e.text for s in (load_recipe(SplitRecipe(**parent)),) for e in s.dev + s.test}
    new_data = write_rows(tmp_path / "new.tsv", synthetic_rows(100, seed=62))
    shutil.copy(tmp_path / "data" / "one.tsv", tmp_path / "copy.tsv")
    write_rows(tmp_path / "other.tsv", synthetic_rows(300, seed=61)[:150] + synthetic_rows(100, seed=63))

    def replay(data, ratio=1.0, dataset=new_data):
        config = TrainConfig(model=str(tmp_path / "parent"), dataset=str(dataset), output_dir="unused", seed=9,
                             replay=str(data), replay_ratio=ratio)
        _, rows, lineage = continuation(config, load_splits(str(dataset), seed=9), parent_meta(config.model))
        assert lineage is not None  # a continued model has a lineage
        return rows, lineage.replay_notes

    for spelling in ("./data/one.tsv", str(tmp_path / "data" / "one.tsv"), "copy.tsv"):  # same rows, any path
        rows, notes = replay(spelling)
        assert rows and not {e.text for e in rows} & held and notes == [], spelling
    rows, notes = replay("other.tsv")  # other data holding some of the parent's rows: its held-out ones stay out
    assert not {e.text for e in rows} & held and any("parent's dev or test split" in n for n in notes)
    assert replay("copy.tsv", ratio=0.0001)[1] == [f"--replay-ratio 0.0001 x {len(load_splits(str(new_data), seed=9).train)}"
                                                   " new training rows replays no row"]
    rows, notes = replay("copy.tsv", ratio=100)
    assert len(rows) == len(load_recipe(SplitRecipe(**parent)).train) and "all replayed" in notes[0]
    assert any("the new dataset itself" in n for n in replay("new.tsv")[1])


def test_continuing_a_checkpoint_keeps_its_sequence_length_by_default(tmp_path):
    """The surge loop continued a 256-token model at `senti train`'s 128 without a word; now a continued checkpoint
    keeps its own length unless --max-seq-len says otherwise, and a new model still gets 128."""
    data = write_folder(tmp_path / "data", synthetic_rows(200, seed=1), synthetic_rows(40, seed=2))
    train_tiny(tmp_path / "parent", data, max_seq_len=64, epochs=1)
    train_tiny(tmp_path / "child", data, model=str(tmp_path / "parent"), epochs=1)
    train_tiny(tmp_path / "fresh", data, epochs=1, max_steps=2)

    def length(name):
        return json.loads((tmp_path / name / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["max_seq_len"]

    assert (length("parent"), length("child"), length("fresh")) == (64, 64, 128)


def test_replay_never_trains_on_the_parents_held_out_texts_after_its_file_grew(tmp_path, monkeypatch):
    # Train on two.tsv, append 300 rows to it, continue with --replay two.tsv --replay-ratio 5: 228 of 1,280 replayed
    # rows were the parent's own dev and test rows (the grown file no longer matched, and was cut anew).
    from senti.toolkit.data.seen import read_hashes
    from senti.toolkit.data.splits import load_recipe, load_splits
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.models import parent_meta
    from senti.toolkit.training.train import continuation

    monkeypatch.chdir(tmp_path)
    two = write_rows(tmp_path / "two.tsv", synthetic_rows(300, seed=71))
    train_tiny(tmp_path / "parent", two, epochs=1, seed=3)
    assert read_hashes(tmp_path / "parent", layout.HELDOUT_TEXT_HASHES) is not None
    parent = json.loads((tmp_path / "parent" / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["data"]
    held = {e.text for s in (load_recipe(SplitRecipe(**parent)),) for e in s.dev + s.test}
    with two.open("a", encoding="utf-8") as fh:
        fh.write("".join(f"{label}\t{text}\n" for label, text in synthetic_rows(300, seed=72)))
    new = write_rows(tmp_path / "new.tsv", synthetic_rows(320, seed=73))
    config = TrainConfig(model=str(tmp_path / "parent"), dataset=str(new), output_dir="unused", seed=9,
                         replay=str(two), replay_ratio=5)
    _, rows, lineage = continuation(config, load_splits(str(new), seed=9), parent_meta(config.model))
    assert rows and not {e.text for e in rows} & held
    assert lineage is not None and any("the parent held them out" in n for n in lineage.replay_notes)


def test_a_continuation_that_loses_to_its_parent_keeps_the_parents_weights(tiny_checkpoint, tmp_path):
    """Labels that teach the opposite of what the parent knew: every checkpoint of the child is worse on the new dev
    labels than the parent was, so the output holds the parent's weights and says so (before, the child's best
    checkpoint was written as "best" however bad)."""
    from safetensors.numpy import load_file

    ckpt, _ = tiny_checkpoint
    flipped = [("negative" if label == "positive" else "positive", text) for label, text in synthetic_rows(96, seed=61)]
    new = write_folder(tmp_path / "flipped", flipped, synthetic_rows(32, seed=62))
    said: list[str] = []
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    metrics = run_training(TrainConfig(model=str(ckpt), dataset=str(new), output_dir=str(tmp_path / "child"),
                                       epochs=3, batch_size=16, lr=3e-3, device="cpu", seed=7), say=said.append).to_json()
    assert metrics["kept_parent"] is True and metrics["evaluations"][0]["parent"] is True
    assert any(line.startswith("parent: dev accuracy") for line in said)
    assert any("no checkpoint beat the parent" in line for line in said)
    assert any(line.startswith("parent -> parent kept: new dev (32) ") for line in said)
    row = metrics["parent_comparison"]["dev_accuracy"]
    assert row["texts"] == 32 and row["parent"] == row["kept"] and 0.05 < row["parent"]["interval"] < 0.2
    parent, child = (load_file(str(p / layout.PADDLENLP_SAFE_WEIGHTS)) for p in (ckpt, tmp_path / "child"))
    encoder = [k for k in parent if k.startswith("ernie.encoder")]
    assert encoder and all((parent[k] == child[k]).all() for k in encoder)
    dev = json.loads((tmp_path / "child" / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["dev"]
    assert dev["parent"] is True and dev["step"] == 0


def test_a_continuation_that_beats_its_parent_replaces_it(tiny_checkpoint, tmp_path):
    ckpt, old_data = tiny_checkpoint
    new = write_folder(tmp_path / "new", synthetic_rows(200, seed=71), synthetic_rows(40, seed=72))
    metrics = train_tiny(tmp_path / "child", new, model=str(ckpt), replay=str(old_data), epochs=2, lr=1e-3)
    parent, best = metrics["evaluations"][0], metrics["best"]
    assert parent["parent"] is True and "old_dev_accuracy" in parent  # the parent's own dev split is watched
    assert metrics["kept_parent"] is (best.get("parent") is True)
    assert set(metrics["parent_comparison"]) == {"dev_accuracy", "old_dev_accuracy"}
    assert metrics["parent_comparison"]["old_dev_accuracy"]["kept"]["accuracy"] == best["old_dev_accuracy"]
    if not metrics["kept_parent"]:
        from senti.core.checkpoint import EvalPoint
        from senti.toolkit.training.run import better

        assert better(EvalPoint.from_json(best), EvalPoint.from_json(parent))
        assert parent["old_dev_accuracy"] - best["old_dev_accuracy"] <= 0.01


def test_accuracy_intervals_widen_as_the_dev_set_shrinks():
    from senti.toolkit.training.run import accuracy_interval

    assert accuracy_interval(0.875, 32) > 0.1 > accuracy_interval(0.875, 1200) > 0.015
    assert 0 < accuracy_interval(1.0, 32) < accuracy_interval(0.5, 32)  # all right is not a certainty


def test_checkpoints_a_small_dev_set_scores_the_same_are_told_apart_by_log_loss():
    from senti.core.checkpoint import EvalPoint
    from senti.toolkit.training.run import better

    def point(accuracy, macro_f1, log_loss):
        return EvalPoint(epoch=1, step=1, dev_accuracy=accuracy, dev_macro_f1=macro_f1, dev_log_loss=log_loss)

    best = point(0.875, 0.87, 0.40)
    assert better(point(0.875, 0.87, 0.31), best)
    assert not better(point(0.875, 0.87, 0.52), best)
    assert better(point(0.906, 0.90, 0.90), best)
    assert not better(point(0.844, 0.84, 0.10), best)
    big = point(0.875, 0.87, 0.31)
    assert not better(big, best, small_dev=False)  # a dev set of 100 texts or more: ties keep the earlier one


def test_freeze_encoder_trains_the_head_and_holds_every_encoder_weight(tiny_checkpoint, tmp_path):
    """--freeze-encoder: after training the encoder's weights are the parent's to the bit, the head's are not."""
    from safetensors.numpy import load_file

    ckpt, old_data = tiny_checkpoint
    new = write_folder(tmp_path / "new", synthetic_rows(120, seed=81), synthetic_rows(32, seed=82))
    metrics = train_tiny(tmp_path / "child", new, model=str(ckpt), epochs=2, lr=1e-2, freeze_encoder=True)
    before, after = (load_file(str(folder / layout.PADDLENLP_SAFE_WEIGHTS)) for folder in (ckpt, tmp_path / "child"))
    assert not metrics["kept_parent"]  # a child was kept (else the folder would hold the parent's weights anyway)
    encoder = [n for n in before if n.startswith("ernie.") and not n.startswith("ernie.pooler.")]
    assert len(encoder) > 10 and all((before[n] == after[n]).all() for n in encoder)
    assert not (before["classifier.weight"] == after["classifier.weight"]).all()


def test_l2_sp_holds_a_continued_model_near_its_parent_and_needs_a_parent(tiny_checkpoint, tmp_path):
    """--l2-sp: the same continuation moves every weight less from the parent's with the penalty than without; the
    loss records its term; a start that is not a checkpoint is refused in one line."""
    from safetensors.numpy import load_file

    ckpt, _ = tiny_checkpoint
    shop = {"positive": ["新鲜水灵", "甜度很高", "个头大"], "negative": ["烂了一半", "发霉", "酸涩"]}  # words it never saw
    new = write_folder(tmp_path / "new", synthetic_rows(120, shop, seed=83), synthetic_rows(32, shop, seed=84))
    parent = load_file(str(ckpt / layout.PADDLENLP_SAFE_WEIGHTS))
    moved = {}
    for alpha in (0.0, 100.0):
        out = tmp_path / f"child-{alpha:g}"
        metrics = train_tiny(out, new, model=str(ckpt), epochs=2, l2_sp=alpha, interpolate="off")
        assert not metrics["kept_parent"]
        child = load_file(str(out / layout.PADDLENLP_SAFE_WEIGHTS))
        moved[alpha] = sum(float(((child[n] - parent[n]) ** 2).sum()) for n in parent if n.startswith("ernie."))
        assert ("l2_sp" in metrics["step_terms"][0]) == bool(alpha)
    assert moved[100.0] < 0.5 * moved[0.0]
    with pytest.raises(SentiError, match="--l2-sp pulls a continued model toward its parent"):
        train_tiny(tmp_path / "scratch", new, l2_sp=1.0)


def test_a_surge_of_one_label_continues_its_parent_with_replay_and_is_refused_without(tiny_checkpoint, tmp_path):
    """A surge of complaints can be all one class: the parent knows both labels and the replay shows the other, so a
    new training split of one label (here 0 in ChnSentiCorp's layout, the parent's 'negative') continues it; without
    --replay it is one line naming the label. Before, the loader refused any train split of one label."""
    from senti.core.checkpoint import read_meta
    from senti.toolkit.data.splits import load_recipe

    ckpt, old_data = tiny_checkpoint
    complaints = [("0", text) for label, text in synthetic_rows(120, seed=81) if label == "negative"]
    test = [({"negative": "0", "positive": "1"}[label], text) for label, text in synthetic_rows(20, seed=82)]
    new = write_folder(tmp_path / "surge", complaints[:48], complaints[48:], test)
    metrics = train_tiny(tmp_path / "child", new, model=str(ckpt), replay=str(old_data), epochs=1)
    assert metrics["data"]["replayed_rows"] == 48
    assert metrics["data"]["label_counts"]["train"] == {"negative": 48}
    recipe = read_meta(tmp_path / "child").data
    assert recipe is not None and recipe.labels == ["negative", "positive"]
    again = load_recipe(recipe)  # eval and export cut the child's data again from its recipe
    assert again.labels == ["negative", "positive"] and len(again.train) == 48
    with pytest.raises(SentiError, match="train split holds only 'negative'; continuing a model on one label needs "
                                         "--replay"):
        train_tiny(tmp_path / "alone", new, model=str(ckpt), epochs=1)
