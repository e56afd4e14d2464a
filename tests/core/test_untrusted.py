"""core.untrusted: model folders read like export folders (inside the folder, bounded, bounded JSON depth, every
config number range-checked before anything is built), each refusal one line naming the file."""

from __future__ import annotations

import json
import os

import pytest

from senti.core.errors import ArtifactError, SentiError
from senti.core.untrusted import CONFIG_RANGES, MAX_JSON_DEPTH, check_model_config, parse_json

ERNIE_TINY = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512,
              "vocab_size": 5000, "max_position_embeddings": 512, "type_vocab_size": 4, "pad_token_id": 0}


def test_a_normal_config_passes_and_each_number_out_of_range_is_named():
    check_model_config(ERNIE_TINY, "config.json")
    for key, value in [("num_hidden_layers", 1_000_000), ("hidden_size", 10**9), ("vocab_size", 10**12),
                       ("max_position_embeddings", 10**8), ("num_hidden_layers", True), ("hidden_size", "128"),
                       ("intermediate_size", -1), ("num_attention_heads", 2.5)]:
        low, high = CONFIG_RANGES[key]
        with pytest.raises(ArtifactError) as err:
            check_model_config({**ERNIE_TINY, key: value}, "m/config.json")
        assert str(err.value) == f"m/config.json: {key} {value!r} is not a whole number in [{low:,}, {high:,}]"
    with pytest.raises(ArtifactError, match="not a multiple of num_attention_heads"):
        check_model_config({**ERNIE_TINY, "num_attention_heads": 3}, "m/config.json")
    with pytest.raises(ArtifactError, match="parameters"):  # each number in range, the whole too big
        check_model_config({**ERNIE_TINY, "hidden_size": 8192, "num_hidden_layers": 64, "intermediate_size": 32768,
                            "num_attention_heads": 64}, "m/config.json")


def test_deep_or_broken_json_is_one_line():
    with pytest.raises(ArtifactError, match=f"nested too deeply, over {MAX_JSON_DEPTH} levels"):
        parse_json(b"[" * 100_000 + b"]" * 100_000, "deep.json")
    with pytest.raises(ArtifactError, match=f"nested too deeply, over {MAX_JSON_DEPTH} levels"):
        nested: list = [1]
        for _ in range(MAX_JSON_DEPTH + 1):
            nested = [nested]
        parse_json(json.dumps({"a": nested}).encode(), "d.json")
    with pytest.raises(ArtifactError, match="not UTF-8"):
        parse_json(b'{"a": "\xff"}', "bad.json")
    with pytest.raises(ArtifactError, match="not JSON"):
        parse_json(b'{"a": ', "cut.json")
    assert parse_json(b'{"a": [1, {"b": 2}]}', "ok.json") == {"a": [1, {"b": 2}]}


def _paddlenlp_folder(folder, **config):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**ERNIE_TINY, **config}), encoding="utf-8")
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "好", "差"]) + "\n",
                                      encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


@pytest.mark.parametrize("craft", ["layers", "vocab_link", "deep"])
def test_senti_train_refuses_a_crafted_paddlenlp_folder_in_one_line(tmp_path, craft):
    # num_hidden_layers 1,000,000 grew memory about 60 MB/s until killed; vocab.txt -> /etc/passwd was read.
    from typer.testing import CliRunner

    from senti.cli import app
    from tests.helpers import synthetic_rows, write_folder

    data = write_folder(tmp_path / "data", synthetic_rows(40, seed=1), synthetic_rows(10, seed=2))
    folder = _paddlenlp_folder(tmp_path / "pn", **({"num_hidden_layers": 1_000_000} if craft == "layers" else {}))
    if craft == "vocab_link":
        (folder / "vocab.txt").unlink()
        os.symlink("/etc/passwd", folder / "vocab.txt")
    if craft == "deep":
        (folder / "config.json").write_text("[" * 50_000 + "]" * 50_000, encoding="utf-8")
    result = CliRunner().invoke(app, ["train", "--model", str(folder), "--dataset", str(data), "--output-dir",
                                      str(tmp_path / "out"), "--epochs", "1", "--no-baseline"])
    assert result.exit_code == 2, result.output
    expected = {"layers": "num_hidden_layers 1000000 is not a whole number",
                "vocab_link": "the vocabulary 'vocab.txt' leads outside the model folder",
                "deep": "unreadable model config (nested too deeply"}[craft]
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0] and "Traceback" not in result.output, result.output


def test_a_checkpoint_whose_vocabulary_leads_out_of_it_is_refused(tiny_checkpoint):
    from senti.core.checkpoint import load_checkpoint

    checkpoint, _ = tiny_checkpoint
    (checkpoint / "vocab.txt").unlink()
    os.symlink("/etc/passwd", checkpoint / "vocab.txt")
    with pytest.raises(SentiError, match="leads outside the checkpoint folder"):
        load_checkpoint(checkpoint)


@pytest.mark.parametrize("key,value,message", [
    ("hidden_dropout_prob", 2.0, "hidden_dropout_prob 2.0 is not a probability in \\[0, 1\\)"),
    ("attention_probs_dropout_prob", float("nan"), "attention_probs_dropout_prob nan is not a probability"),
    ("hidden_act", "gelu_fast_and_loose", "hidden_act 'gelu_fast_and_loose' is not one of gelu"),
    ("pad_token_id", 100_000, "pad_token_id 100000 is outside the vocabulary of 5,000"),
    ("ngram_weight", float("inf"), "ngram_weight inf is not a number in \\[0, 1000\\]"),
    ("ngram_weight", 1e308, "ngram_weight 1e\\+308 is not a number"),
    ("ngram_weight", -1, "ngram_weight -1 is not a number"),
])
def test_a_configs_other_settings_are_checked_in_one_line(key, value, message):
    """Each of these gave a 60-90-line traceback, or exit 0 with every answer the same, before."""
    with pytest.raises(ArtifactError, match=message) as err:
        check_model_config({**ERNIE_TINY, key: value}, "m/config.json")
    assert "\n" not in str(err.value)


def test_class_offsets_must_match_the_labels_a_paddlenlp_config_names():
    config = {**ERNIE_TINY, "id2label": {"0": "negative", "1": "positive"}}
    check_model_config({**config, "class_offsets": [0.1, -0.1]}, "m/config.json")
    with pytest.raises(ArtifactError, match="one finite number"):
        check_model_config({**config, "class_offsets": [0.3]}, "m/config.json")
    with pytest.raises(ArtifactError, match="within \\+-100\\) per label"):  # 1000 was accepted: every answer one class
        check_model_config({**config, "class_offsets": [0.0, 500.0]}, "m/config.json")
