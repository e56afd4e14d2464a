"""A model's own tokenizer.json as a checkpoint's tokenizer: ids as PaddleNLP's tokenizers give them, the folder
round trip, and the doors (not a definition, a special token missing, a link out of the folder)."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer

from senti.core import layout
from senti.core.artifacts import TokenizerSettings
from senti.core.errors import ArtifactError
from senti.core.json_tokenizer import JsonTokenizer, is_json_tokenizer_folder, load_definition, tokenizer_text
from senti.serving.tokenizer import FastTokenizer
from tests.helpers import unigram_definition


def test_ids_are_the_definitions_own_with_its_special_tokens_around_them():
    definition = unigram_definition()
    tokenizer = JsonTokenizer(definition)
    plain = Tokenizer.from_str(definition)
    text = "这个东西非常好，推荐购买"
    assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) == plain.encode(text, add_special_tokens=False).ids
    ids = tokenizer([text, "好"], max_length=6)["input_ids"]
    assert ids[0] == [0, *plain.encode(text, add_special_tokens=False).ids[:4], 2] and ids[1][0] == 0
    assert (tokenizer.pad_token_id, tokenizer.mask_token_id, len(tokenizer)) == (1, 160, 161)


def test_the_folder_round_trip_and_the_serving_tokenizer_agree(tmp_path):
    tokenizer = JsonTokenizer(unigram_definition())
    tokenizer.save_pretrained(str(tmp_path))
    assert is_json_tokenizer_folder(tmp_path) and tokenizer_text(tmp_path) == tokenizer.definition
    again = JsonTokenizer.from_folder(tmp_path)
    settings = TokenizerSettings.of(again)
    assert (settings.vocab_file, settings.tokenizer_class, settings.cls_token) == (layout.TOKENIZER_JSON,
                                                                                  "JsonTokenizer", "<s>")
    fast = FastTokenizer.from_settings(tmp_path, settings)
    texts = ["这个东西非常好", "质量垃圾 Great value", "", "好" * 400]
    assert fast(texts, 64) == again(texts, max_length=64)["input_ids"]


def test_what_is_not_a_definition_is_refused_in_one_line(tmp_path):
    for text in ("[]", json.dumps({"model": {"type": "WordLevel"}}), "{" * 10_000, "not json"):
        with pytest.raises(ArtifactError, match="not a tokenizer.json of a"):
            load_definition(text, "t.json")
    broken = json.loads(unigram_definition())
    broken["model"]["vocab"] = "nothing"
    with pytest.raises(ArtifactError, match="unreadable tokenizer.json"):
        load_definition(json.dumps(broken), "t.json")
    with pytest.raises(ArtifactError, match="the cls token '<cls>' is not in the vocabulary"):
        JsonTokenizer(unigram_definition(), cls_token="<cls>")


def test_a_tokenizer_json_linked_outside_its_folder_is_not_read(tmp_path):
    JsonTokenizer(unigram_definition()).save_pretrained(str(tmp_path))
    outside = tmp_path.parent / "elsewhere.json"
    (tmp_path / layout.TOKENIZER_JSON).rename(outside)
    (tmp_path / layout.TOKENIZER_JSON).symlink_to(outside)
    with pytest.raises(ArtifactError, match="leads outside"):
        JsonTokenizer.from_folder(tmp_path)


def _with_regex(part: str, pattern: str) -> str:
    data = json.loads(unigram_definition())
    if part == "normalizer":
        data["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"Regex": pattern}, "content": " "}]}
    else:
        data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            data["pre_tokenizer"]]}
    return json.dumps(data)


def test_a_tokenizer_regex_with_nested_repetition_is_refused_at_the_door():
    """`(a+)+$` in a Replace normalizer or a Split pre-tokenizer: a 30-character text makes Oniguruma hit its retry
    limit and `tokenizers` panic (a BaseException), which stopped senti serve's batcher."""
    hostile = Tokenizer.from_str(_with_regex("normalizer", "(a+)+$"))
    with pytest.raises(BaseException, match="retry-limit"):  # what got through before the door checked it
        hostile.encode("a" * 30 + "!")
    for part in ("normalizer", "pre_tokenizer"):
        for pattern in ("(a+)+$", "(?:ab|a)*x", "((a{2,}))+"):
            with pytest.raises(ArtifactError, match=f"the {part} regex .* repeats a group that repeats"):
                load_definition(_with_regex(part, pattern), "t.json")
    with pytest.raises(ArtifactError, match="characters long"):
        load_definition(_with_regex("normalizer", "a" * 1001), "t.json")
    # what XLM-R / e5 (" {2,}"), GPT-2-style byte-level (a top-level alternation) and senti's own tokenizers use
    for pattern in (" {2,}", r"'s|'t|'re| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", r"[(]+", "(a)+"):
        load_definition(_with_regex("pre_tokenizer", pattern), "t.json")


def test_a_panic_inside_tokenizers_is_an_ordinary_error_of_that_call():
    from senti.serving.tokenizer import TokenizerFailure

    fast = FastTokenizer.from_definition(unigram_definition(), TokenizerSettings(
        vocab_file="tokenizer.json", do_lower_case=False, tokenizer_class="JsonTokenizer", cls_token="<s>",
        sep_token="</s>", pad_token="<pad>", unk_token="<unk>"), "t.json")
    fast._tokenizer = Tokenizer.from_str(_with_regex("normalizer", "(a+)+$"))  # as if the door had let it in
    with pytest.raises(TokenizerFailure, match="the tokenizer failed on these texts"):
        fast.encode_batch(["a" * 30 + "!"])
    assert fast.encode_batch(["好"]) is not None  # the same tokenizer answers the next call
