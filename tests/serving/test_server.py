"""senti.serving.server (`senti serve` as a real process on 127.0.0.1): answers, load, limits and hostile input
(one bad or huge text hurts nobody else, every numeric option range-checked, the HTTP edges), fuzzing, metrics,
graceful shutdown, each text checked and tokenized once."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from senti.core.errors import SentiError
from senti.serving import Predictor
from tests.helpers import AUTH, KEY, PARITY, running_server

LONE = "x\ud800"  # valid JSON ("x\\ud800"), but no tokenizer can take it

ROOT = Path(__file__).resolve().parents[2]
@pytest.fixture(scope="module")
def server(_exported):
    out, _ = _exported
    with running_server(out, "--max-texts", "64", "--max-body-bytes", "65536") as (base, _proc):
        yield base


@pytest.fixture(scope="module")
def expected(_exported):
    out, _ = _exported
    texts = [t for _, t in PARITY]
    return dict(zip(texts, Predictor.load(out, backend="onnx").predict(texts)))


def test_answers_equal_the_in_process_predictor(server, expected):
    texts = list(expected)[:40]
    response = httpx.post(f"{server}/v1/predict", json={"texts": texts}, headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert body["labels"] == ["negative", "positive"]
    for text, got in zip(texts, body["predictions"]):
        want = expected[text]
        assert got["label"] == want.label and got["score"] == pytest.approx(want.score, abs=1e-5)
    assert httpx.post(f"{server}/v1/predict", json={"texts": []}, headers=AUTH).json()["predictions"] == []


def test_concurrent_load_has_no_errors_and_every_answer_is_right(server, expected):
    texts = list(expected)
    clients, total = 32, 2000
    results: dict[str, Any] = {"ok": 0, "wrong": 0, "errors": []}

    async def client(worker: int):
        async with httpx.AsyncClient(base_url=server, headers=AUTH, timeout=30) as http:
            for n in range(worker, total, clients):
                chosen = [texts[(n * 7 + k) % len(texts)] for k in range(1 + n % 3)]
                response = await http.post("/v1/predict", json={"texts": chosen})
                if response.status_code != 200:
                    results["errors"].append(response.status_code)
                    continue
                labels = [p["label"] for p in response.json()["predictions"]]
                results["ok" if labels == [expected[t].label for t in chosen] else "wrong"] += 1

    async def main():
        await asyncio.gather(*(client(w) for w in range(clients)))

    started = time.perf_counter()
    asyncio.run(main())
    assert results["errors"] == [] and results["wrong"] == 0 and results["ok"] == total
    assert time.perf_counter() - started < 240
    metrics = httpx.get(f"{server}/metrics").text
    batches = [line for line in metrics.splitlines() if line.startswith("senti_batch_size_count")]
    calls = float(batches[0].split()[-1])
    assert calls < total, "concurrent requests should share model calls"


def test_bad_inputs_get_their_status_and_the_server_keeps_serving(server):
    post = f"{server}/v1/predict"
    raw = {"Content-Type": "application/json", **AUTH}
    assert httpx.post(post, content=b'{"texts": [', headers=raw).status_code == 422
    assert httpx.post(post, json={"texts": "one string"}, headers=AUTH).status_code == 422
    assert httpx.post(post, json={"texts": [1, 2]}, headers=AUTH).status_code == 422
    assert httpx.post(post, json={"texts": ["a"], "extra": 1}, headers=AUTH).status_code == 422
    assert httpx.post(post, json=["a"], headers=AUTH).status_code == 422
    infinite = httpx.post(post, content=b'{"texts": Infinity}', headers=raw)  # found by the fuzz test
    assert infinite.status_code == 422 and infinite.json()["detail"][0]["loc"] == ["body", "texts"]
    too_many = httpx.post(post, json={"texts": ["好"] * 65}, headers=AUTH)
    assert too_many.status_code == 413 and "at most 64" in too_many.json()["detail"]
    assert httpx.post(post, json={"texts": ["好" * 40000]}, headers=AUTH).status_code == 413
    assert httpx.post(post, json={"texts": ["好"]}).status_code == 401
    assert httpx.post(post, json={"texts": ["好"]}, headers={"X-API-Key": "wrong"}).status_code == 401
    bearer = httpx.post(post, json={"texts": ["好"]}, headers={"Authorization": f"Bearer {KEY}"})
    assert bearer.status_code == 200
    assert httpx.get(f"{server}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server}/readyz").status_code == 200
    metrics = httpx.get(f"{server}/metrics").text
    assert 'senti_requests_total{status="401"}' in metrics and 'senti_errors_total{reason="invalid"}' in metrics
    assert "senti_request_latency_seconds_bucket" in metrics and "senti_queue_depth" in metrics
    assert "/v1/predict" in httpx.get(f"{server}/openapi.json").json()["paths"]


def test_fuzzing_against_the_openapi_schema_finds_no_5xx(server):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    schema = httpx.get(f"{server}/openapi.json").json()
    assert schema["components"]["schemas"]["PredictRequest"]["required"] == ["texts"]
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50)
    anything = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) |
                            st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
    bodies = (st.fixed_dictionaries({"texts": st.lists(st.text(max_size=200), max_size=70)}) |
              st.fixed_dictionaries({"texts": anything}) | anything)
    statuses = []

    # derandomize: the same 150 cases on every run, so CI is reproducible (random runs found the Infinity bug)
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    @given(body=bodies)
    def check(body):
        response = httpx.post(f"{server}/v1/predict", content=json.dumps(body), timeout=30,
                              headers={"Content-Type": "application/json", **AUTH})
        statuses.append(response.status_code)
        assert response.status_code < 500, (body, response.text)

    check()
    assert 200 in statuses and 422 in statuses
    assert httpx.get(f"{server}/readyz").status_code == 200


def test_full_queue_answers_503_with_retry_after(_exported):
    out, _ = _exported
    with running_server(out, "--max-queue", "8", "--max-wait-ms", "200", "--max-batch-size", "64") as (base, _):
        async def burst():
            async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
                return await asyncio.gather(*(http.post("/v1/predict", json={"texts": ["好"] * 4})
                                              for _ in range(12)))

        responses = asyncio.run(burst())
        codes = sorted(r.status_code for r in responses)
        assert 200 in codes and 503 in codes and set(codes) <= {200, 503}
        assert all(r.headers["Retry-After"] == "1" for r in responses if r.status_code == 503)
        assert httpx.post(f"{base}/v1/predict", json={"texts": ["好"]}, headers=AUTH).status_code == 200


def test_sigterm_finishes_requests_in_flight(_exported):
    out, _ = _exported
    with running_server(out, "--max-wait-ms", "500", "--max-batch-size", "64") as (base, proc):
        async def in_flight():
            async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
                tasks = [asyncio.create_task(http.post("/v1/predict", json={"texts": ["非常好很满意"]}))
                         for _ in range(6)]
                await asyncio.sleep(0.2)  # the requests now wait in the batcher
                proc.send_signal(signal.SIGTERM)
                return await asyncio.gather(*tasks)

        responses = asyncio.run(in_flight())
        assert [r.status_code for r in responses] == [200] * 6
        # uvicorn re-raises SIGTERM once its graceful shutdown is done, so the status names the signal.
        assert proc.wait(timeout=30) == -signal.SIGTERM


def test_a_served_text_is_checked_and_tokenized_once(_exported, monkeypatch):
    """The server checked each text and, in window mode, tokenized it to count its windows; the batch then checked
    and tokenized it again. Now the batch scores what the request's check found, and a text checked for another
    model (a reload in between) is read again as plain text."""
    from starlette.requests import Request

    from senti.serving import predictor as predictor_module
    from senti.serving.server import PredictService, ServerConfig
    from senti.serving.tokenizer import FastTokenizer

    model = Predictor.load(_exported[0], backend="onnx", long_text="window")
    calls = {"encode": 0, "check": 0}
    encode, check = FastTokenizer.encode_batch, predictor_module.text_problem

    def counted_encode(self, texts, **kw):
        calls["encode"] += len(texts)
        return encode(self, texts, **kw)

    def counted_check(text):
        calls["check"] += 1
        return check(text)

    monkeypatch.setattr(FastTokenizer, "encode_batch", counted_encode)
    monkeypatch.setattr(predictor_module, "text_problem", counted_check)
    monkeypatch.setattr("senti.serving.server.text_problem", counted_check)
    texts = ["很好", "质量太差了，退货" * 40]

    async def one_request():  # the service as the route calls it, with the client still connected
        service = PredictService(model, ServerConfig())
        service.batcher.start()
        connected = asyncio.Event()

        async def receive():
            await connected.wait()  # never set: no disconnect arrives
            return {"type": "http.disconnect"}

        try:
            return await service.predict(texts, Request({"type": "http", "headers": []}, receive))
        finally:
            await service.batcher.stop()

    answer = json.loads(asyncio.run(one_request()).body)
    assert calls == {"encode": 2, "check": 2}
    assert [p["windows"] for p in answer["predictions"]] == model.windows(texts) and answer["predictions"][1]["windows"] > 1
    checked, _ = model.checked(texts)
    other = Predictor.load(_exported[0], backend="onnx", long_text="window")
    calls.update(encode=0, check=0)
    assert [p.label for p in other.predict(checked)] == [p.label for p in model.predict(texts)]
    assert calls["check"] == 2 + 2  # other checked them itself; model checked the plain texts


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


def test_a_texts_answer_does_not_depend_on_its_batch_mates(_exported):
    """Under the INT8 format `auto` serves on a CPU with VNNI, a text scores the same alone, in length-sorted batches
    and among random batch-mates, to 1e-6: one client's traffic never moves another client's scores."""
    import numpy as np

    from senti.serving.backends import FORMATS

    out, _ = _exported
    assert FORMATS[Predictor.load(out).backend_name].batch_independent  # whatever auto serves on this CPU
    predictor = Predictor.load(out, backend="onnx-int8-static")
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


def test_aspects_over_http_equal_the_in_process_answers_and_bad_lists_are_one_line(server, _exported):
    # POST /v1/aspects: the aspect list sent with each request (no reload), every mentioning unit scored through
    # the batcher, the answers those of Predictor.aspects.
    from senti.core.aspects import parse_aspects

    out, _ = _exported
    aspects = [{"name": "service", "label": "服务", "keywords": ["服务员", "态度"]},
               {"name": "price", "keywords": ["价格"]}, {"name": "parking", "keywords": ["停车"]}]
    texts = ["服务员非常好，很满意。价格太差了！很失望", "价格物超所值，推荐购买", "没有提到任何方面"]
    response = httpx.post(f"{server}/v1/aspects", json={"texts": texts, "aspects": aspects}, headers=AUTH)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["aspects"] == ["service", "price", "parking"] and len(body["answers"]) == 3
    local = Predictor.load(out, backend="onnx").aspects(texts, parse_aspects(aspects, "test"))
    for got, want in zip(body["answers"], local):
        for name, answer in want.items():
            assert got[name]["polarity"] == answer.polarity and got[name]["evidence"] == answer.to_json()["evidence"]
            assert got[name]["score"] == pytest.approx(answer.score, abs=1e-5) if answer.score is not None else \
                got[name]["score"] is None
    assert body["answers"][2] == {name: {"polarity": "not_mentioned", "score": None, "evidence": []}
                                  for name in ("service", "price", "parking")}
    only_price = httpx.post(f"{server}/v1/aspects", json={"texts": texts[:1], "aspects": aspects[1:2]},
                            headers=AUTH).json()
    assert list(only_price["answers"][0]) == ["price"]  # another list, the next request, no reload

    for bad, says in [({"texts": texts, "aspects": [{"name": "a", "keywords": []}]}, "aspects: aspect 1"),
                      ({"texts": texts, "aspects": aspects + aspects[:1]}, "appears twice"),
                      ({"texts": texts, "aspects": aspects, "unit": "word"}, "unit must be one of"),
                      ({"texts": texts, "aspects": aspects, "neutral_margin": 0.7}, "neutral_margin must be in"),
                      ({"texts": [LONE], "aspects": aspects}, "invalid_text")]:
        response = httpx.post(f"{server}/v1/aspects", content=json.dumps(bad),
                              headers={**AUTH, "Content-Type": "application/json"})
        assert response.status_code == 422 and says in response.text, (bad, response.text)
    assert httpx.post(f"{server}/v1/aspects", json={"texts": texts, "aspects": aspects}).status_code == 401
    too_many = httpx.post(f"{server}/v1/aspects", json={"texts": ["价格好"] * 65, "aspects": aspects}, headers=AUTH)
    assert too_many.status_code == 413
    assert httpx.post(f"{server}/v1/predict", json={"texts": texts}, headers=AUTH).status_code == 200


def _aspect_counts(server) -> dict:
    """senti_aspect_answers_total of /metrics: {(aspect, polarity): count}."""
    import re

    pattern = re.compile(r'^senti_aspect_answers_total\{aspect="([^"]*)",polarity="([^"]*)"\} (\S+)$', re.M)
    return {(a, p): float(v) for a, p, v in pattern.findall(httpx.get(f"{server}/metrics").text)}


def test_metrics_count_aspect_answers_by_aspect_and_polarity(server):
    aspects = [{"name": "price", "keywords": ["价格"]}, {"name": "parking", "keywords": ["停车"]}]
    texts = ["价格物超所值，推荐购买", "价格太贵了，很失望", "没有提到任何方面"]
    before = _aspect_counts(server)
    body = httpx.post(f"{server}/v1/aspects", json={"texts": texts, "aspects": aspects}, headers=AUTH).json()
    after = _aspect_counts(server)
    want: dict = {}
    for row in body["answers"]:
        for name, answer in row.items():
            want[(name, answer["polarity"])] = want.get((name, answer["polarity"]), 0) + 1
    assert want[("parking", "not_mentioned")] == 3 and sum(want.values()) == 6
    assert {key: after[key] - before.get(key, 0.0) for key in want} == want


def test_aspect_series_in_metrics_are_bounded_against_a_client_inventing_names(monkeypatch):
    from senti.serving import metrics as metrics_module
    from senti.serving.aspects import AspectAnswer

    monkeypatch.setattr(metrics_module, "MAX_ASPECT_SERIES", 3)
    counted = metrics_module.ServerMetrics()
    for i in range(10):
        counted.on_aspects([{f"made_up_{i}": AspectAnswer("negative"), "made_up_0": AspectAnswer("positive")}])
    text = counted.exposition().decode()
    assert text.count('senti_aspect_answers_total{aspect="made_up_') == 3  # the first 3 names, one polarity each
    assert 'senti_aspect_answers_total{aspect="(other)",polarity="negative"} 7.0' in text
    assert 'senti_aspect_answers_total{aspect="made_up_0",polarity="positive"} 10.0' in text
