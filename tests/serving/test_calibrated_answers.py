"""Calibrated probabilities and the unsure flag through every Python runtime: `Predictor`, `senti serve` over HTTP,
Ray Data and the streamed files, with the unsure rows written as the label queue `senti label` reads; and an export
without calibration answering exactly the plain softmax."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import numpy as np
import pytest

from senti.core.calibration import calibrated_probabilities
from senti.core.scores import softmax
from senti.serving import Predictor
from tests.helpers import AUTH, PARITY, export_tiny, running_server, synthetic_rows

TEXTS = [t for _, t in PARITY] + [t for _, t in synthetic_rows(200, seed=31)] + ["一般", "还行吧", ""]


@pytest.fixture(scope="module")
def python_answers(_exported):
    out, record = _exported
    predictor = Predictor.load(out, backend="onnx")
    return predictor, predictor.predict(TEXTS)


def test_the_predictor_answers_the_calibrated_softmax_and_marks_the_texts_below_the_threshold(_exported,
                                                                                            python_answers):
    _, record = _exported
    predictor, answers = python_answers
    assert record["calibration"]["temperature"] > 0 and record["calibration"]["texts"] == 120  # the dev split
    assert record["abstain"]["target"] == "coverage=0.8" and record["abstain"]["dev_coverage"] >= 0.8
    logits = predictor.logits(TEXTS)[0]
    want = calibrated_probabilities(logits, predictor.calibration)
    got = np.array([[a.probabilities[lab] for lab in predictor.labels] for a in answers])
    assert np.abs(got - want).max() < 1e-12
    assert np.abs(want - softmax(logits.astype(np.float64))).max() > 0.01  # the temperature changed the scores
    threshold = record["abstain"]["threshold"]
    assert [a.unsure for a in answers] == [a.score < threshold for a in answers]
    assert 0 < sum(a.unsure for a in answers) < len(answers)  # both kinds among these texts
    assert [a.label for a in answers] == [predictor.labels[i] for i in logits.argmax(1)]  # the labels stay


def test_an_export_without_calibration_answers_the_plain_softmax(_trained_checkpoint, tmp_path):
    out = tmp_path / "plain"
    record = export_tiny(_trained_checkpoint / "checkpoint", out, formats=("onnx",), calibrate=False)
    assert record["calibration"] is None and record["abstain"] is None
    predictor = Predictor.load(out, backend="onnx")
    answers = predictor.predict(TEXTS[:50])
    logits = predictor.logits(TEXTS[:50])[0]
    got = np.array([[a.probabilities[lab] for lab in predictor.labels] for a in answers])
    assert np.abs(got - softmax(logits.astype(np.float64))).max() < 1e-12
    assert not any(a.unsure for a in answers)


def _unsure_count(base: str) -> float:
    text = httpx.get(f"{base}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("senti_unsure_total{"))


def test_http_answers_the_same_calibrated_probabilities_and_unsure_flags_and_counts_them(_exported, python_answers):
    out, _ = _exported
    predictor, answers = python_answers
    with running_server(out) as (base, _proc):
        before = _unsure_count(base)
        got = []
        for start in range(0, len(TEXTS), 64):
            response = httpx.post(f"{base}/v1/predict", json={"texts": TEXTS[start:start + 64]}, headers=AUTH)
            assert response.status_code == 200
            got += response.json()["predictions"]
        after = _unsure_count(base)
    assert [g["unsure"] for g in got] == [a.unsure for a in answers]
    diff = max(abs(g["probabilities"][lab] - a.probabilities[lab]) for g, a in zip(got, answers)
               for lab in predictor.labels)
    assert diff < 1e-6
    assert after - before == sum(a.unsure for a in answers)


def test_ray_writes_the_same_calibrated_probabilities_and_unsure_column(_exported, python_answers, tmp_path):
    pytest.importorskip("ray")
    out, _ = _exported
    predictor, answers = python_answers
    rows = [{"id": str(i), "text": t} for i, t in enumerate(TEXTS)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "senti.cli", "predict", "--model", str(out), "--engine", "ray",
                           "--backend", "onnx", "--input", str(src), "--output", str(tmp_path / "out.jsonl"),
                           "--id-column", "id"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    scored = {}
    for part in sorted((tmp_path / "out.jsonl").rglob("*.json*")) if (tmp_path / "out.jsonl").is_dir() else \
            [tmp_path / "out.jsonl"]:
        for line in part.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            scored[record["id"]] = record
    assert len(scored) == len(TEXTS)
    for i, a in enumerate(answers):
        r = scored[str(i)]
        assert r["unsure"] == a.unsure and r["label"] == a.label
        assert max(abs(r[f"prob_{lab}"] - a.probabilities[lab]) for lab in predictor.labels) < 1e-6


def test_the_unsure_rows_of_a_file_become_the_label_queue_senti_label_reads(_exported, python_answers, tmp_path):
    from senti.toolkit.surge.labeling import read_picks

    out, _ = _exported
    predictor, answers = python_answers
    src = tmp_path / "reviews.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", "text": t}, ensure_ascii=False) + "\n"
                           for i, t in enumerate(TEXTS)), encoding="utf-8")
    assert TEXTS[-1] == ""  # scored like any text: an empty review is unsure as often as the model says
    queue = tmp_path / "queue.jsonl"
    done = subprocess.run([sys.executable, "-m", "senti.cli", "predict", "--model", str(out), "--backend", "onnx",
                           "--input", str(src), "--output", str(tmp_path / "scored.jsonl"), "--unsure-output",
                           str(queue)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    unsure = [i for i, a in enumerate(answers) if a.unsure]
    assert f"{len(unsure)} unsure (score below" in done.stdout
    picks = read_picks(queue)
    assert [p.id for p in picks] == [f"r{i}" for i in unsure]
    assert [p.guess for p in picks] == [answers[i].label for i in unsure]
    assert all(abs(p.confidence - answers[i].score) < 1e-6 for p, i in zip(picks, unsure))
    scored = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["unsure"] for r in scored] == [a.unsure for a in answers]


def test_the_unsure_queue_is_refused_in_one_line_where_it_cannot_be_written(_exported, _trained_checkpoint, tmp_path):
    out, _ = _exported
    src = tmp_path / "reviews.txt"
    src.write_text("好\n差\n", encoding="utf-8")
    plain = tmp_path / "plain"
    export_tiny(_trained_checkpoint / "checkpoint", plain, formats=("onnx",))  # no --abstain
    for model, queue, says in ((out, "queue.tsv", "the unsure queue is written as JSONL"),
                               (plain, "queue.jsonl", "this export has no abstention threshold")):
        done = subprocess.run([sys.executable, "-m", "senti.cli", "predict", "--model", str(model), "--input",
                               str(src), "--output", str(tmp_path / "o.jsonl"), "--unsure-output",
                               str(tmp_path / queue)], capture_output=True, text=True, timeout=300)
        assert done.returncode != 0 and says in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr
        assert not (tmp_path / queue).exists() and not (tmp_path / "o.jsonl").exists()
