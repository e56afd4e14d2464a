"""`senti train --aspects` (senti.toolkit.training.aspect_heads): a head per aspect over one encoder, learned from
aspect labels on tiny data, exported with parity, and answered by `Predictor.aspects`, `senti aspects` and
`POST /v1/aspects` alike; what heads cannot answer is one line."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from senti.core.aspects import Aspect, head_aspects, head_labels, read_aspects
from senti.core.checkpoint import EvalPoint, read_meta
from senti.core.errors import SentiError
from senti.toolkit.training.config import TrainConfig
from senti.toolkit.training.run import better
from tests.helpers import ASPECT_CUES, AUTH, running_server, synthetic_aspect_rows, train_aspect_heads


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    return train_aspect_heads(tmp_path_factory.mktemp("heads"))


def test_head_labels_name_each_aspects_four_outputs_and_nothing_else_reads_as_heads():
    labels = head_labels(["service", "taste"])
    assert labels[:4] == ["service/positive", "service/neutral", "service/negative", "service/not_mentioned"]
    assert head_aspects(labels) == ["service", "taste"]
    for other in (["negative", "positive"], labels[:-1], labels[4:] + labels[:4][::-1], ["a b/positive"] * 4):
        assert head_aspects(other) is None


def test_macro_f1_first_keeps_the_checkpoint_that_answers_more_than_the_majority():
    majority = EvalPoint(epoch=1, step=1, dev_accuracy=0.70, dev_macro_f1=0.25)
    learned = EvalPoint(epoch=2, step=2, dev_accuracy=0.68, dev_macro_f1=0.55)
    assert not better(learned, majority) and better(learned, majority, macro_first=True)


def test_heads_learn_the_tiny_aspects_far_beyond_the_majority_answer_and_record_what_they_are(heads):
    data, ckpt, _, metrics = heads
    # the floor: answering each aspect's most frequent training class reads macro-F1 0.18 on this dev split
    assert metrics.best.dev_macro_f1 > 0.7 and metrics.best.dev_accuracy > 0.7
    assert metrics.evaluations[0].dev_macro_f1 < metrics.best.dev_macro_f1
    meta = read_meta(ckpt)
    assert head_aspects(meta.labels) == list(ASPECT_CUES) and meta.data is not None
    assert metrics.data.rows == {"train": 240, "dev": 60, "test": 0}
    assert sum(metrics.data.label_counts["train"].values()) == 480


def test_the_export_answers_aspects_as_the_checkpoint_did_in_every_format_and_over_http(heads):
    from senti.serving import Predictor

    data, _, export, metrics = heads
    record = json.loads((export / "export.json").read_text(encoding="utf-8"))
    # parity judged per aspect: the export's accuracy over the dev pairs is the checkpoint's own dev accuracy
    assert record["reference_accuracy"] == pytest.approx(metrics.best.dev_accuracy)
    assert all(record["formats"][f]["parity"]["fit"] for f in ("paddle", "onnx"))
    aspects = read_aspects(data / "aspects.json")
    rows = synthetic_aspect_rows(40, seed=7)
    texts = [r["text"] for r in rows]
    onnx = Predictor.load(export, backend="onnx").aspects(texts, aspects)
    paddle = Predictor.load(export, backend="paddle").aspects(texts, aspects)
    assert [{k: v.polarity for k, v in row.items()} for row in onnx] == \
        [{k: v.polarity for k, v in row.items()} for row in paddle]
    right = [onnx[i][name].polarity == r["aspects"][name] for i, r in enumerate(rows) for name in ASPECT_CUES]
    assert sum(right) / len(right) > 0.7
    # evidence: the keyword's sentence where one is found; no score and no evidence when not mentioned
    for row in onnx:
        for answer in row.values():
            assert (answer.score is None) == (answer.polarity == "not_mentioned")
            assert answer.polarity != "not_mentioned" or not answer.evidence
    with running_server(export) as (base, _):
        response = httpx.post(f"{base}/v1/aspects", json={"texts": texts, "aspects": [a.to_json() for a in aspects]},
                              headers=AUTH)
        assert response.status_code == 200
        assert response.json()["answers"] == [{k: v.to_json() for k, v in row.items()} for row in onnx]
        unknown = httpx.post(f"{base}/v1/aspects", json={"texts": texts[:1],
                                                         "aspects": [{"name": "parking", "keywords": ["停车"]}]},
                             headers=AUTH)
        assert unknown.status_code == 422 and "no head for parking" in unknown.text


def test_an_aspect_without_a_head_and_sentence_only_options_are_one_line_each(heads, tmp_path):
    from senti.serving import Predictor
    from senti.toolkit.evaluation.evaluate import Scorer, evaluate_domains
    from senti.toolkit.training.train import run_training

    data, ckpt, export, _ = heads
    with pytest.raises(SentiError, match="aspect heads answer service, taste; it has no head for parking$"):
        Predictor.load(export).aspects(["服务很热情"], [Aspect("parking", ("停车",))])
    with pytest.raises(SentiError, match="has aspect heads .*: scored per aspect on one split of its aspect data"):
        evaluate_domains(Scorer(ckpt), [str(data), str(data)], "dev")

    config = TrainConfig(output_dir=str(tmp_path / "x"), model="scratch:tiny", dataset=str(data),
                         aspects=str(data / "aspects.json"), replay=str(data), epochs=1)
    with pytest.raises(SentiError, match="--aspects trains aspect heads; --replay belongs to a sentence model"):
        run_training(config, say=lambda _: None)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"aspects": [{"name": "parking", "keywords": ["停车"]}]}), encoding="utf-8")
    config = TrainConfig(output_dir=str(tmp_path / "y"), model="scratch:tiny", dataset=str(data), aspects=str(other),
                         epochs=1)
    with pytest.raises(SentiError, match="the train split labels none of the aspects of"):
        run_training(config, say=lambda _: None)
    listed = json.loads((data / "aspects.json").read_text(encoding="utf-8"))["aspects"]
    more = tmp_path / "more.json"  # two aspects no row labels: their heads answered every text alike
    more.write_text(json.dumps({"aspects": listed + [{"name": "battery", "keywords": ["电池"]},
                                                     {"name": "wifi", "keywords": ["信号"]}]}), encoding="utf-8")
    config = TrainConfig(output_dir=str(tmp_path / "z"), model="scratch:tiny", dataset=str(data), aspects=str(more),
                         epochs=1)
    with pytest.raises(SentiError, match=r"battery \(0 labelled\), wifi \(0 labelled\) have fewer than 10 "
                                         "labelled training pairs"):
        run_training(config, say=lambda _: None)
    assert not (tmp_path / "z").exists()


def test_select_picks_by_the_least_sure_aspect_head_and_names_it(heads, tmp_path):
    from senti.toolkit.surge.selection import Selection, select_file

    data, _, export, _ = heads
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"text": r["text"]}, ensure_ascii=False) + "\n"
                            for r in synthetic_aspect_rows(60, seed=9)), encoding="utf-8")
    aspects = read_aspects(data / "aspects.json")
    counts = select_file(export, pool, tmp_path / "picks.jsonl", Selection(budget=5, aspects=aspects))
    picks = [json.loads(line) for line in (tmp_path / "picks.jsonl").read_text(encoding="utf-8").splitlines()]
    assert counts["picked"] == len(picks) == 5
    margins = [p["score"] for p in picks]
    assert margins == sorted(margins) and all(0 <= m < 1 for m in margins)
    for p in picks:  # the guess is an aspect's answer; the reason names the aspect and its margin
        assert p["guess"] in ("positive", "neutral", "negative", "not_mentioned") and p["labels"] == [
            "positive", "neutral", "negative", "not_mentioned"]
        assert p["reason"].split(":")[0] in ("aspect service", "aspect taste")
    with pytest.raises(SentiError, match="no head for parking"):
        select_file(export, pool, tmp_path / "x.jsonl", Selection(budget=5, aspects=[Aspect("parking", ("停车",))]))


def test_heads_continued_on_new_labels_keep_the_parent_when_they_do_not_beat_it(heads, tmp_path):
    from senti.toolkit.training.train import run_training

    data, ckpt, _, metrics = heads
    config = TrainConfig(output_dir=str(tmp_path / "child"), model=str(ckpt), dataset=str(data),
                         aspects=str(data / "aspects.json"), epochs=1, lr=1e-7, seed=1, threads=2)
    child = run_training(config, say=lambda _: None)
    assert child.evaluations[0].parent and child.evaluations[0].dev_accuracy == pytest.approx(metrics.best.dev_accuracy)
    assert child.kept_parent and child.parent_comparison is not None
    assert child.parent_comparison["dev_accuracy"].texts == 120  # labelled pairs, not the 60 texts


def test_senti_eval_scores_the_heads_per_aspect_alike_on_the_checkpoint_and_its_export(heads, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app
    from senti.core.aspects import head_aspects
    from senti.core.checkpoint import read_meta
    from senti.toolkit.evaluation.calibrate import head_dev_scores
    from senti.toolkit.records import AspectEvalRecord

    _, ckpt, export, metrics = heads
    meta = read_meta(ckpt)
    calibration = meta.calibration
    assert calibration is not None  # fitted on the 120 labelled dev pairs after training
    logits, gold = head_dev_scores(ckpt, head_aspects(meta.labels) or [])
    # the answers every runtime gives: each head's argmax of its calibrated probabilities (vector scaling's biases
    # may move an answer near the boundary)
    bias = np.asarray(calibration.bias[:4]) if calibration.bias else 0.0
    dev_accuracy = float(((logits / calibration.temperature + bias).argmax(1) == gold).mean())
    for folder in (ckpt, export):
        out = tmp_path / f"{folder.name}.json"
        done = CliRunner().invoke(app, ["eval", "--model", str(folder), "--split", "dev", "--output", str(out)])
        assert done.exit_code == 0, done.output
        record = AspectEvalRecord.from_json(json.loads(out.read_text(encoding="utf-8")), out)
        # the dev split scored again: the figures the kept checkpoint was chosen by, in either runtime
        assert record.texts == 60 and record.figures.pairs == 120 and set(record.per_aspect) == set(ASPECT_CUES)
        assert record.figures.accuracy == pytest.approx(dev_accuracy)
        if calibration.bias is None:  # a temperature alone changes no answer: the figures training chose by
            assert record.figures.accuracy == pytest.approx(metrics.best.dev_accuracy)
            assert record.figures.macro_f1 == pytest.approx(metrics.best.dev_macro_f1)
        assert "mention F1" in done.output and "per aspect" in done.output
