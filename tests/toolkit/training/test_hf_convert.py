"""Hugging Face BERT-family folders as senti models: names, transposes, RoBERTa's position offset, the numpy check
that catches a wrong conversion, the doors, and `senti convert` / `senti train --model HF_FOLDER` end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from senti.cli import app
from senti.core import layout
from senti.core.errors import ArtifactError
from senti.toolkit.training import convert as convert_module
from senti.toolkit.training import hf_convert
from senti.toolkit.training.convert import ConvertMeta, convert_folder
from senti.toolkit.training.hf_convert import ernie_name, is_hf_folder
from tests.helpers import write_hf_folder


def test_names_map_to_paddlenlps_ernie_with_linear_weights_transposed():
    assert ernie_name("encoder.layer.3.attention.self.query.weight") == ("encoder.layers.3.self_attn.q_proj.weight",
                                                                         True)
    assert ernie_name("encoder.layer.0.attention.output.LayerNorm.gamma") == ("encoder.layers.0.norm1.weight", False)
    assert ernie_name("encoder.layer.1.output.dense.bias") == ("encoder.layers.1.linear2.bias", False)
    assert ernie_name("embeddings.LayerNorm.beta") == ("embeddings.layer_norm.bias", False)
    assert ernie_name("pooler.dense.weight") == ("pooler.dense.weight", True)
    assert ernie_name("embeddings.word_embeddings.weight") == ("embeddings.word_embeddings.weight", False)
    assert ernie_name("cls.predictions.bias") is None and ernie_name("embeddings.position_ids") is None


@pytest.mark.parametrize("model_type,weights,tokenizer", [("bert", "safetensors", "json"), ("bert", "bin", "vocab"),
                                                          ("roberta", "bin", "json")])
def test_conversion_matches_the_numpy_forward_of_the_original(tmp_path, model_type, weights, tokenizer):
    source = write_hf_folder(tmp_path / "hf", model_type=model_type, weights=weights, tokenizer=tokenizer)
    assert is_hf_folder(source)
    meta = convert_folder(source, tmp_path / "out")
    assert meta.check.max_abs_diff < 1e-4 and meta.check.tokens > 20
    assert meta.model_type == model_type and meta.fresh == [] and "cls.predictions.bias" in meta.left_out
    written = ConvertMeta.read(tmp_path / "out")
    assert written.check == meta.check
    config = json.loads((tmp_path / "out" / layout.PADDLENLP_CONFIG).read_text())
    # RoBERTa's positions start after its padding id: two rows fewer than the original's table
    assert config["max_position_embeddings"] == 64 and config["pad_token_id"] == (0 if model_type == "bert" else 1)
    vocab = (tmp_path / "out" / layout.VOCAB).read_text(encoding="utf-8").split("\n")
    assert vocab[:3] == (["[PAD]", "[UNK]", "[CLS]"] if model_type == "bert" else ["[CLS]", "[PAD]", "[UNK]"])
    assert not is_hf_folder(tmp_path / "out")  # a PaddleNLP folder now


@pytest.mark.parametrize("fault", ["no transpose", "no position offset"])
def test_the_numpy_check_catches_a_wrong_conversion(tmp_path, monkeypatch, fault):
    source = write_hf_folder(tmp_path / "hf", model_type="roberta", weights="safetensors")
    if fault == "no transpose":  # of the square query weights, which no shape check can catch
        original = hf_convert.ernie_name
        monkeypatch.setattr(hf_convert, "ernie_name",
                            lambda n: (lambda m: m and (m[0], m[1] and "q_proj" not in m[0]))(original(n)))
    else:
        monkeypatch.setattr(hf_convert, "position_offset", lambda config: 0)
        monkeypatch.setattr(convert_module, "position_offset", lambda config: 2)  # the reference stays right
    with pytest.raises(ArtifactError, match="differs from the original"):
        convert_folder(source, tmp_path / "out")
    assert not (tmp_path / "out" / layout.PADDLENLP_SAFE_WEIGHTS).exists()


def test_folders_that_are_not_what_they_say_are_refused_in_one_line(tmp_path):
    cases: dict[str, tuple[dict, str]] = {
        "act": ({"hidden_act": "swish"}, "hidden_act 'swish'"),
        "layers": ({"num_hidden_layers": 1_000_000}, "num_hidden_layers"),
        "rotary": ({"position_embedding_type": "relative_key"}, "absolute positions only"),
        "vocab": ({"vocab_size": 7}, "the tokenizer has"),
    }
    for name, (override, message) in cases.items():
        source = write_hf_folder(tmp_path / name, weights="safetensors", **override)
        with pytest.raises(ArtifactError, match=message) as err:
            convert_folder(source, tmp_path / f"{name}-out")
        assert "\n" not in str(err.value)
    source = write_hf_folder(tmp_path / "wordlevel", weights="safetensors")
    (source / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordLevel", "vocab": {}}}))
    with pytest.raises(ArtifactError, match="a WordLevel tokenizer; senti reads Unigram, WordPiece, BPE"):
        convert_folder(source, tmp_path / "wordlevel-out")


def test_a_vocabulary_linked_outside_the_folder_is_not_read(tmp_path):
    source = write_hf_folder(tmp_path / "hf", weights="safetensors", tokenizer="vocab")
    outside = tmp_path / "secret.txt"
    outside.write_text((source / "vocab.txt").read_text())
    (source / "vocab.txt").unlink()
    (source / "vocab.txt").symlink_to(outside)
    with pytest.raises(ArtifactError, match="leads outside"):
        convert_folder(source, tmp_path / "out")


def test_senti_convert_writes_a_folder_senti_train_starts_from(tmp_path, binary_folder):
    source = write_hf_folder(tmp_path / "hf", weights="bin")
    runner = CliRunner()
    result = runner.invoke(app, ["convert", str(source), "--output-dir", str(tmp_path / "converted")])
    assert result.exit_code == 0, result.output
    assert "within" in result.output and "cls.predictions.bias" in result.output
    again = runner.invoke(app, ["convert", str(source), "--output-dir", str(tmp_path / "converted")])
    assert again.exit_code == 2 and "not empty" in again.output
    for start in (source, tmp_path / "converted"):  # the Hugging Face folder itself, and its conversion
        out = tmp_path / f"ckpt-{start.name}"
        result = runner.invoke(app, ["train", "--model", str(start), "--dataset", str(binary_folder), "--output-dir",
                                     str(out), "--epochs", "1", "--max-steps", "12", "--batch-size", "16",
                                     "--max-seq-len", "32", "--no-baseline"])
        assert result.exit_code == 0, result.output
        assert "a pretrained Hugging Face encoder" in result.output  # its learning rate's origin
        meta = json.loads((out / layout.CHECKPOINT_META).read_text())
        assert meta["model"]["source"] == "huggingface"
    assert "last hidden states within" in json.loads((tmp_path / "ckpt-hf" / layout.METRICS).read_text()
                                                     )["model"]["loaded"]


def test_the_converted_weights_are_the_originals(tmp_path):
    from safetensors.numpy import load_file

    source = write_hf_folder(tmp_path / "hf", weights="safetensors")
    convert_folder(source, tmp_path / "out")
    original, converted = load_file(str(source / "model.safetensors")), load_file(
        str(tmp_path / "out" / layout.PADDLENLP_SAFE_WEIGHTS))
    np.testing.assert_array_equal(converted["encoder.layers.1.linear1.weight"],
                                  original["bert.encoder.layer.1.intermediate.dense.weight"].T)
    np.testing.assert_array_equal(converted["embeddings.word_embeddings.weight"],
                                  original["bert.embeddings.word_embeddings.weight"])


def test_pretrain_and_distill_start_from_a_hugging_face_folder(tmp_path, binary_folder):
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.distill import DistillConfig, run_distillation
    from senti.toolkit.training.pretrain import PretrainConfig, run_pretraining
    from senti.toolkit.training.train import run_training

    source = write_hf_folder(tmp_path / "hf", weights="bin")
    said: list[str] = []
    run_pretraining(PretrainConfig(output_dir=str(tmp_path / "pre"), corpus=[str(binary_folder)], model=str(source),
                                   max_steps=2, batch_size=8, device="cpu", seed=3), say=said.append)
    assert any("converted from Hugging Face bert" in line for line in said)
    assert (tmp_path / "pre" / layout.VOCAB).read_text(encoding="utf-8") == (
        "\n".join(json.loads((source / "tokenizer.json").read_text())["model"]["vocab"]) + "\n")
    run_training(TrainConfig(output_dir=str(tmp_path / "teacher"), model=str(source), dataset=str(binary_folder),
                             epochs=1, max_steps=4, batch_size=16, max_seq_len=32, baseline=False, device="cpu"),
                 say=lambda _: None)
    report = run_distillation(DistillConfig(teacher=str(tmp_path / "teacher"), student=str(source),
                                            dataset=str(binary_folder), output_dir=str(tmp_path / "student"),
                                            epochs=1, max_steps=3, batch_size=16, device="cpu"), say=lambda _: None)
    assert report is not None
    student = json.loads((tmp_path / "student" / layout.CHECKPOINT_META).read_text())["model"]
    assert "converted from Hugging Face" in student["loaded"]


def test_a_unigram_model_keeps_its_own_tokenizer_json(tmp_path):
    from senti.core.json_tokenizer import JsonTokenizer, is_json_tokenizer_folder

    source = write_hf_folder(tmp_path / "hf", model_type="xlm-roberta", tokenizer="unigram")
    meta = convert_folder(source, tmp_path / "out")
    assert meta.tokenizer == layout.TOKENIZER_JSON and meta.check.max_abs_diff < 1e-4
    assert is_json_tokenizer_folder(tmp_path / "out") and not (tmp_path / "out" / layout.VOCAB).exists()
    tokenizer = JsonTokenizer.from_folder(tmp_path / "out")
    assert (tokenizer.cls_token, tokenizer.sep_token, tokenizer.pad_token_id) == ("<s>", "</s>", 1)
    ids = tokenizer(["这个东西非常好"], max_length=5)["input_ids"][0]
    assert ids[0] == 0 and ids[-1] == 2 and len(ids) == 5


def test_a_large_unigram_vocabulary_is_trimmed_to_the_pieces_texts_use(tmp_path, monkeypatch):
    from tokenizers import Tokenizer

    monkeypatch.setattr(convert_module, "TRIM_ABOVE", 50)  # the tiny vocabulary stands in for XLM-R's 250,002
    source = write_hf_folder(tmp_path / "hf", model_type="xlm-roberta", tokenizer="unigram")
    texts = ["非常好", "质量垃圾", "推荐购买，很满意"]
    meta = convert_folder(source, tmp_path / "out", trim_texts=texts)
    assert meta.vocab is not None and meta.vocab.trim is not None
    trim = meta.vocab.trim
    assert trim.texts_checked == 3 and meta.vocab.rows < meta.vocab.of
    original = Tokenizer.from_file(str(source / "tokenizer.json"))
    trimmed = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    assert trimmed.get_vocab_size() == meta.vocab.rows
    for text in texts:  # the same pieces, under new ids
        assert original.encode(text, add_special_tokens=False).tokens == trimmed.encode(
            text, add_special_tokens=False).tokens
    from safetensors.numpy import load_file

    rows = load_file(str(tmp_path / "out" / layout.PADDLENLP_SAFE_WEIGHTS))["embeddings.word_embeddings.weight"]
    old = load_file(str(source / "model.safetensors"))["roberta.embeddings.word_embeddings.weight"]
    piece = original.encode("推荐购买", add_special_tokens=False).tokens[0]
    np.testing.assert_array_equal(rows[trimmed.token_to_id(piece)], old[original.token_to_id(piece)])


def test_a_unigram_model_trains_exports_and_serves_with_its_own_ids(tmp_path, binary_folder):
    from senti.serving import Predictor
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    source = write_hf_folder(tmp_path / "hf", model_type="xlm-roberta", tokenizer="unigram")
    run_training(TrainConfig(output_dir=str(tmp_path / "ckpt"), model=str(source), dataset=str(binary_folder),
                             epochs=1, max_steps=10, batch_size=16, max_seq_len=24, baseline=False, device="cpu",
                             lr=1e-3), say=lambda _: None)
    meta = json.loads((tmp_path / "ckpt" / layout.CHECKPOINT_META).read_text())
    assert meta["tokenizer"]["class"] == "JsonTokenizer" and meta["tokenizer"]["vocab_file"] == "tokenizer.json"
    runner = CliRunner()
    result = runner.invoke(app, ["export", "--model", str(tmp_path / "ckpt"), "--output-dir", str(tmp_path / "exp"),
                                 "--formats", "onnx"])
    assert result.exit_code == 0, result.output
    predictor = Predictor.load(tmp_path / "exp", backend="onnx")
    standalone = __import__("tokenizers").Tokenizer.from_file(str(tmp_path / "exp" / "tokenizer.json"))
    text = "这个东西非常好，推荐购买"
    assert standalone.encode(text).ids[0] == 0 and standalone.encode(text).ids[-1] == 2  # <s> ... </s>
    from senti.core.checkpoint import load_checkpoint

    model, tokenizer, _ = load_checkpoint(tmp_path / "ckpt")
    assert standalone.encode(text).ids == tokenizer([text], max_length=24)["input_ids"][0]
    from senti.toolkit.evaluation.evaluate import predict_logits

    texts = [text, "质量垃圾，很失望", "好"]
    dynamic = predict_logits(model, tokenizer(texts, max_length=24)["input_ids"])
    np.testing.assert_allclose(predictor.logits(texts, 8)[0], dynamic, atol=1e-4)


def test_batches_are_padded_with_the_models_own_padding_id(tmp_path):
    """XLM-R pads with 1: padding with 0 (<s>) made padded positions count as text, so a short text's answer
    depended on the longest text in its batch."""
    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.evaluation.evaluate import predict_logits
    from senti.toolkit.training.models import build_model

    source = write_hf_folder(tmp_path / "hf", model_type="xlm-roberta", tokenizer="unigram")
    model, tokenizer, _ = build_model(str(source), ["negative", "positive"], ["好"], 32)
    del load_checkpoint
    model.eval()
    ids = tokenizer(["好", "这个东西非常好，推荐购买，很满意，质量不错"], max_length=32)["input_ids"]
    together = predict_logits(model, ids)
    alone = np.concatenate([predict_logits(model, [row]) for row in ids])
    np.testing.assert_allclose(together, alone, atol=1e-5)
