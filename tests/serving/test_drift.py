"""The drift figures counted by senti serve, senti predict and export: shares, the confidence histogram the page
draws, error rows left out, and the lines printed against the dev reference."""

from __future__ import annotations

import httpx
import pytest

from senti.serving.drift import CONFIDENCE_BUCKETS, DriftCounter, describe, summarize
from senti.serving.predictor import Prediction
from tests.helpers import (
    AUTH,
    PARITY,
    running_server,
)


def prediction(label: str, score: float, truncated=False, tokens=10, unknown=0) -> Prediction:
    return Prediction(label=label, score=score, probabilities={label: score}, truncated=truncated, tokens=tokens,
                      unknown_tokens=unknown)


def test_shares_and_the_confidence_histogram():
    scored = [prediction("positive", 0.55), prediction("positive", 0.95, truncated=True, unknown=5),
              prediction("negative", 0.999), None, prediction("negative", 0.65)]
    figures = summarize(scored)
    assert figures["texts"] == 4  # the error row (None) is not a text scored
    assert figures["label_shares"] == {"negative": 0.5, "positive": 0.5}
    assert figures["low_confidence_share"] == 0.5 and figures["truncated_share"] == 0.25
    assert figures["unknown_token_share"] == pytest.approx(5 / 40)
    histogram = figures["confidence_histogram"]
    assert histogram["upper_bounds"] == list(CONFIDENCE_BUCKETS) and sum(histogram["shares"]) == pytest.approx(1)
    # 0.55 -> (0.5, 0.6], 0.65 -> (0.6, 0.7], 0.95 -> (0.9, 0.95], 0.999 -> (0.99, 1.0]
    assert histogram["shares"] == [0, 0.25, 0.25, 0, 0, 0.25, 0, 0.25]
    empty = DriftCounter().summary()
    assert empty["texts"] == 0 and empty["confidence_histogram"]["shares"] == [0.0] * len(CONFIDENCE_BUCKETS)


def test_the_lines_put_traffic_beside_the_dev_reference():
    here = summarize([prediction("positive", 0.6, truncated=True), prediction("negative", 0.9)])
    reference = {"low_confidence_share": 0.04, "truncated_share": 0.1, "label_shares": {"negative": 0.5}}
    lines = describe(here, reference)
    assert lines[0] == "confidence below 0.7: 4.0% on dev, 50.0% here"
    assert lines[1] == "texts truncated: 10.0% on dev, 50.0% here"
    assert lines[2] == "tokens outside the vocabulary ([UNK]): 0.0% here"  # not in this (older) reference
    assert lines[3] == "predicted labels here: negative 50.0%, positive 50.0%; on dev: negative 50.0%"


def _metric(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def test_drift_metrics_move_on_shifted_input(_exported, tmp_path):
    out, record = _exported
    assert record["reference_stats"]["texts"] == len(PARITY) and record["parity_sample"]["texts"]
    with running_server(out) as (base, _):
        post = lambda texts: httpx.post(f"{base}/v1/predict", json={"texts": texts}, headers=AUTH)  # noqa: E731
        assert post([t for _, t in PARITY[:20]]).status_code == 200
        before = httpx.get(f"{base}/metrics").text
        assert _metric(before, "senti_unknown_tokens_total") == 0 and _metric(before, "senti_texts_total") == 20
        shifted = ["齉龘靐" * 3, "𠀀𠀁𠀂 ωψχ", "好" * 200]  # characters the vocabulary never saw, and a long text
        assert post(shifted).status_code == 200
        after = httpx.get(f"{base}/metrics").text
    assert _metric(after, "senti_unknown_tokens_total") > 0 and _metric(after, "senti_truncated_texts_total") == 1
    assert _metric(after, 'senti_confidence_count') == 23 and 'senti_predicted_total{label="positive"}' in after
    from typer.testing import CliRunner

    from senti.cli import app

    src = tmp_path / "shifted.txt"
    src.write_text("\n".join(shifted * 5) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--input", str(src), "--output",
                                      str(tmp_path / "o.jsonl")])
    assert result.exit_code == 0, result.output
    assert "drift against the dev texts recorded at export" in result.output
    line = next(x for x in result.output.splitlines() if "outside the vocabulary" in x)
    assert "0.0% on dev" in line and "% here" in line and not line.endswith(" 0.0% here")
