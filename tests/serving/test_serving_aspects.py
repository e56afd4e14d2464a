"""senti.serving.aspects: sentences and clauses with their offsets, mentions by keyword, answers from a real tiny
export (and its labels' check), `Predictor.aspects`, and `senti aspects` over a file."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from senti.cli import app
from senti.core.aspects import Aspect
from senti.core.errors import SentiError
from senti.serving import Predictor
from senti.serving.aspects import answer_aspects, mentions, polarity, positive_index, units

ASPECTS = [Aspect("service", ("服务员", "态度")), Aspect("price", ("价格",)), Aspect("parking", ("停车",))]
TEXT = "服务员非常好，很满意。价格太差了！很失望\n"


def test_units_cover_sentences_or_clauses_with_their_offsets():
    sentences = units(TEXT)
    assert [TEXT[a:b] for a, b in sentences] == ["服务员非常好，很满意。", "价格太差了！", "很失望\n"]
    assert [TEXT[a:b] for a, b in units(TEXT, "clause")][:2] == ["服务员非常好，", "很满意。"]
    assert units("   ") == [] and units("无标点") == [(0, 3)]
    with pytest.raises(SentiError, match="unit must be one of"):
        units(TEXT, "word")


def test_mentions_are_the_units_holding_a_keyword():
    found = mentions(TEXT, ASPECTS, "sentence")
    assert set(found) == {"service", "price"}
    (service,) = found["service"]
    assert (service.text, service.start, service.end, service.keyword) == ("服务员非常好，很满意。", 0, 11, "服务员")
    assert TEXT[found["price"][0].start:found["price"][0].end] == "价格太差了！"
    spaced = "  服务员很好 。\n  价格太贵\n"  # the evidence is the unit without its blanks, and so are its offsets
    for ev in (e for evidence in mentions(spaced, ASPECTS, "sentence").values() for e in evidence):
        assert spaced[ev.start:ev.end] == ev.text and ev.text == ev.text.strip()


def test_the_model_must_be_a_positive_negative_pair():
    assert positive_index(["negative", "positive"]) == 1 and positive_index(["正面", "负面"]) == 0
    for labels in (["joy", "anger"], ["negative", "positive", "neutral"], ["pos", "positive"]):
        with pytest.raises(SentiError, match="two-class positive/negative model"):
            positive_index(labels)
    assert [polarity(p, 0.1) for p in (0.9, 0.55, 0.45, 0.1)] == ["positive", "neutral", "neutral", "negative"]


def test_a_real_export_answers_each_aspect_with_its_evidence(_exported):
    predictor = Predictor.load(_exported[0], backend="onnx")
    (row,) = predictor.aspects([TEXT], ASPECTS)
    assert row["service"].polarity == "positive" and row["service"].score > 0.5
    assert row["price"].polarity == "negative" and row["price"].evidence[0].keyword == "价格"
    assert row["parking"].polarity == "not_mentioned" and row["parking"].score is None
    scored = predictor.predict(["服务员非常好，很满意。"])[0].probabilities["positive"]
    assert row["service"].score == pytest.approx(scored, abs=1e-6)  # the sentence itself was scored
    # the list changes per call, no reload; a margin past every score makes each mention neutral
    (narrow,) = answer_aspects(predictor, [TEXT], [Aspect("anything", ("很",))], neutral_margin=0.49)
    assert narrow["anything"].polarity == "neutral" and len(narrow["anything"].evidence) == 2


def test_senti_aspects_answers_a_file_and_keeps_bad_rows_apart(_exported, tmp_path):
    (tmp_path / "aspects.json").write_text(json.dumps({"aspects": [a.to_json() for a in ASPECTS]}), "utf-8")
    rows = [{"id": 1, "text": TEXT}, {"id": 2, "text": 5}, {"id": 3, "text": "停车很方便，非常好"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["aspects", "--model", str(_exported[0]), "--aspects",
                                      str(tmp_path / "aspects.json"), "--input", str(tmp_path / "in.jsonl"),
                                      "--output", str(out)])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert [g.get("id") for g in got] == [1, None, 3] and got[1] == {"line": 2, "error": "'text' must be a string, found int"}
    assert got[0]["aspects"]["price"]["polarity"] == "negative"
    assert got[2]["aspects"]["parking"]["polarity"] == "positive"
    assert "1 rows not answered" in result.output
    refused = CliRunner().invoke(app, ["aspects", "--model", str(_exported[0]), "--aspects",
                                       str(tmp_path / "in.jsonl"), "--input", str(tmp_path / "in.jsonl"),
                                       "--output", str(tmp_path / "x.jsonl")])
    assert refused.exit_code != 0 and "aspect" in refused.output and not (tmp_path / "x.jsonl").exists()
