"""Hostile but fair input (issue 12, serving side): one bad text or one huge text hurts nobody else, every
numeric option is range-checked, and the HTTP edges (chunked bodies, slow clients, departed clients, HEAD)
get their proper answers."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time

import httpx
import pytest
from helpers import AUTH, PARITY, running_server

from senti.core.errors import SentiError
from senti.serving import Predictor

LONE = "x\ud800"  # valid JSON ("x\\ud800"), but no tokenizer can take it


def _metric(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def test_a_text_that_is_not_unicode_fails_only_its_own_request(_exported):
    """It gets 422 naming its index; requests batched with it (200 ms window) still get their answers."""
    out, _ = _exported
    texts = [t for _, t in PARITY[:8]]
    expected = [p.label for p in Predictor.load(out, backend="onnx").predict(texts)]
    with running_server(out, "--max-wait-ms", "200", "--max-batch-size", "64") as (base, _):
        async def together():
            async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
                good = [http.post("/v1/predict", json={"texts": [t]}) for t in texts]
                # json.dumps escapes the surrogate as \ud800 (httpx's own encoder cannot write it)
                bad = http.post("/v1/predict", content=json.dumps({"texts": ["好", LONE]}),
                                headers={"Content-Type": "application/json"})
                return await asyncio.gather(bad, *good)

        bad, *good = asyncio.run(together())
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "texts", 1] and "lone surrogate" in bad.json()["detail"][0]["msg"]
        assert [r.status_code for r in good] == [200] * len(texts)
        assert [r.json()["predictions"][0]["label"] for r in good] == expected


def test_a_failing_batch_is_retried_job_by_job():
    """Whatever makes a model call fail, only the job that caused it fails."""
    from senti.serving.batcher import Batcher

    calls = []

    def predict(texts):
        calls.append(list(texts))
        if "boom" in texts:
            raise RuntimeError("boom")
        return [t.upper() for t in texts]

    async def main():
        batcher = Batcher(predict, max_batch_size=8, max_wait_ms=100)
        batcher.start()
        results = await asyncio.gather(batcher.submit(["a", "b"]), batcher.submit(["boom"]), batcher.submit(["c"]),
                                       return_exceptions=True)
        await batcher.stop()
        return results

    good, failed, other = asyncio.run(main())
    assert good == ["A", "B"] and other == ["C"] and isinstance(failed, RuntimeError)
    assert calls[0] == ["a", "b", "boom", "c"]  # they did share one call first


def test_cancelled_requests_are_dropped_from_the_queue():
    """A job whose client went away never reaches the model."""
    from senti.serving.batcher import Batcher

    release, calls = threading.Event(), []

    def predict(texts):
        calls.append(list(texts))
        release.wait(10)
        return texts

    async def main():
        batcher = Batcher(predict, max_batch_size=1, max_wait_ms=0)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(["first"]))
        await asyncio.sleep(0.1)  # "first" is in the model
        gone = asyncio.ensure_future(batcher.submit(["gone"]))
        later = asyncio.ensure_future(batcher.submit(["later"]))
        await asyncio.sleep(0.05)
        gone.cancel()
        release.set()
        results = await asyncio.gather(first, later)
        await batcher.stop()
        return results, batcher.pending

    (first, later), pending = asyncio.run(main())
    assert first == ["first"] and later == ["later"] and pending == 0
    assert ["gone"] not in calls


def test_long_texts_are_limited_by_windows(_exported):
    out, _ = _exported
    long_text = "好" * 300  # 300 tokens: 4 windows of 126 tokens at stride 63
    predictor = Predictor.load(out, backend="onnx", long_text="window", max_windows=3)
    assert predictor.windows(["好", long_text]) == [1, 4]
    with pytest.raises(SentiError, match="text 1: needs 4 windows; at most 3 per text"):
        predictor.predict(["好", long_text])
    with running_server(out, "--long-text", "window", "--max-windows-per-text", "4", "--max-windows", "6") as (base, _):
        post = lambda texts: httpx.post(f"{base}/v1/predict", json={"texts": texts}, headers=AUTH)  # noqa: E731
        assert post([long_text]).json()["predictions"][0]["windows"] == 4
        too_long = post(["好", long_text + "好" * 63])
        assert too_long.status_code == 413 and too_long.json()["detail"][0]["loc"] == ["body", "texts", 1]
        too_much = post([long_text, long_text])
        assert too_much.status_code == 413 and "8 model inputs (windows); at most 6" in too_much.json()["detail"]
        metrics = httpx.get(f"{base}/metrics").text
        assert _metric(metrics, "senti_windows_total") == 4 and _metric(metrics, "senti_texts_total") == 1
        assert 'senti_requests_total{status="413"} 2.0' in metrics


def test_every_numeric_option_is_range_checked(_exported):
    from typer.testing import CliRunner

    from senti.cli import app
    from senti.serving.server import ServerConfig

    out, _ = _exported
    runner = CliRunner()
    for args in (["predict", "--model", str(out), "--batch-size", "-1", "好"],
                 ["predict", "--model", str(out), "--batch-size", "0", "好"],
                 ["serve", "--model", str(out), "--max-batch-size", "-1"],
                 ["serve", "--model", str(out), "--max-queue", "0"],
                 ["serve", "--model", str(out), "--port", "70000"],
                 ["train", "--output-dir", "x", "--epochs", "0"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "Invalid value" in result.output and "Traceback" not in result.output, args
    with pytest.raises(SentiError, match="batch_size must be at least 1"):
        Predictor.load(out, backend="onnx").predict(["好"], batch_size=0)
    with pytest.raises(SentiError, match="max_batch_size must be at least 1"):
        ServerConfig(max_batch_size=-1)
    from senti.export.pipeline import ExportConfig

    with pytest.raises(SentiError, match="max_seq_len must be between 8 and 2048"):
        ExportConfig(model="m", output_dir="o", max_seq_len=4)


def test_http_edges(_exported):
    """Chunked bodies over the limit get 413 and are counted; HEAD works on health checks; slow senders get 408
    or a closed connection and do not hold up shutdown."""
    out, _ = _exported
    with running_server(out, "--max-body-bytes", "1000", "--body-timeout-s", "1") as (base, proc):
        def chunks():
            yield b'{"texts": ["'
            for _ in range(20):
                yield b"a" * 100
            yield b'"]}'

        chunked = httpx.post(f"{base}/v1/predict", content=chunks(), headers={**AUTH, "Content-Type": "application/json"})
        assert chunked.status_code == 413
        assert httpx.head(f"{base}/healthz").status_code == 200 and httpx.head(f"{base}/readyz").status_code == 200
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as stalled_body:
            stalled_body.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                 b"X-API-Key: " + AUTH["X-API-Key"].encode() + b"\r\nContent-Length: 50\r\n\r\n{")
            assert stalled_body.recv(200).startswith(b"HTTP/1.1 408")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as stalled_headers:
            stalled_headers.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            started = time.monotonic()
            assert stalled_headers.recv(200) == b""  # closed by the server
            assert time.monotonic() - started < 5
        metrics = httpx.get(f"{base}/metrics").text
        assert 'senti_requests_total{status="413"} 1.0' in metrics and 'senti_requests_total{status="408"} 1.0' in metrics
        lingering = socket.create_connection(("127.0.0.1", port), timeout=10)
        lingering.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\n{")
        time.sleep(0.2)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        lingering.close()
        assert time.monotonic() - started < 5, "a stalled client held up shutdown"


def test_predict_file_turns_a_lone_surrogate_into_an_error_row(_exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"text": t}) for t in ("非常好很满意", LONE, "太差了很失望")]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dst = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--backend", "onnx", "--input", str(src),
                                      "--output", str(dst)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]
    assert [r["label"] for r in rows] == ["positive", None, "negative"] and rows[1]["error"]


def test_a_texts_answer_does_not_depend_on_its_batch_mates(_exported):
    """Under backend="auto" on CPU (INT8), a text scores the same alone, in length-sorted batches and among
    random batch-mates, to 1e-6: one client's traffic never moves another client's scores."""
    import numpy as np

    out, _ = _exported
    predictor = Predictor.load(out)
    assert predictor.backend_name == "onnx-int8-static"
    texts = [t for _, t in PARITY[:48]]
    alone = np.array([[p.probabilities[lab] for lab in predictor.labels]
                      for text in texts for p in predictor.predict([text])])
    together = np.array([[p.probabilities[lab] for lab in predictor.labels] for p in predictor.predict(texts)])
    order = np.random.default_rng(0).permutation(len(texts))
    mixed = np.zeros_like(alone)
    for start in range(0, len(texts), 12):
        index = order[start : start + 12]
        mixed[index] = [[p.probabilities[lab] for lab in predictor.labels]
                        for p in predictor.predict([texts[i] for i in index])]
    assert np.abs(alone - together).max() <= 1e-6 and np.abs(alone - mixed).max() <= 1e-6
