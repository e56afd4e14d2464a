"""Serving suite: in-process Predictor throughput against `senti serve` under concurrent load, one run.

The server runs as its own process on 127.0.0.1; the load generator is a bounded number of
asyncio clients sending a fixed number of requests, so the run stops by itself.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from senti.benchmarks.timing import summarize


def in_process(export_dir: Path, texts: list[str], backend: str, batch_size: int, threads: int,
               repeats: int = 3) -> dict:
    from senti.serving import Predictor

    predictor = Predictor.load(export_dir, backend=backend, threads=threads)
    predictor.predict(texts[:batch_size], batch_size=batch_size)
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        predictor.predict(texts, batch_size=batch_size)
        seconds.append(time.perf_counter() - t0)
    return {"texts": len(texts), "seconds": seconds, "texts_per_s": len(texts) / float(np.median(seconds))}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def through_server(export_dir: Path, texts: list[str], backend: str, threads: int, clients: int = 32,
                   requests: int = 2000, texts_per_request: int = 4, max_batch_size: int = 32,
                   max_wait_ms: float = 5.0) -> dict:
    """Start `senti serve` on loopback, send `requests` requests from `clients` clients, stop it."""
    import httpx

    # httpx logs every request at INFO, and PaddleNLP's import sets the root logger to INFO
    logging.getLogger("httpx").setLevel(logging.WARNING)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "senti.cli", "serve", "--model", str(export_dir), "--port", str(port),
         "--backend", backend, "--threads", str(threads), "--max-batch-size", str(max_batch_size),
         "--max-wait-ms", str(max_wait_ms), "--max-queue", str(clients * texts_per_request * 4)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"senti serve did not start: {proc.stderr.read()[-2000:]}")
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        latencies, errors = [], []

        async def client(worker: int, http):
            for n in range(worker, requests, clients):
                chosen = [texts[(n * texts_per_request + k) % len(texts)] for k in range(texts_per_request)]
                t0 = time.perf_counter()
                response = await http.post("/v1/predict", json={"texts": chosen})
                latencies.append(time.perf_counter() - t0)
                if response.status_code != 200:
                    errors.append(response.status_code)

        async def main():
            limits = httpx.Limits(max_connections=clients)
            async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
                await http.post("/v1/predict", json={"texts": texts[:max_batch_size]})  # warm-up
                t0 = time.perf_counter()
                await asyncio.gather(*(client(w, http) for w in range(clients)))
                return time.perf_counter() - t0

        wall = asyncio.run(main())
        metrics = httpx.get(f"{base}/metrics").text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    batch_count = next(float(line.split()[-1]) for line in metrics.splitlines()
                       if line.startswith("senti_batch_size_count"))
    batch_sum = next(float(line.split()[-1]) for line in metrics.splitlines()
                     if line.startswith("senti_batch_size_sum"))
    return {"clients": clients, "requests": requests, "texts_per_request": texts_per_request, "errors": len(errors),
            "wall_seconds": wall, "requests_per_s": requests / wall,
            "texts_per_s": requests * texts_per_request / wall, "latency_ms": summarize(latencies),
            "mean_model_batch": batch_sum / max(batch_count, 1)}


def bench_serving(export_dir: Path, texts: list[str], backend: str = "onnx", threads: int = 2, **load) -> dict:
    """Both measurements and their ratio, from one run on the same machine and model."""
    direct = in_process(export_dir, texts, backend, load.get("max_batch_size", 32), threads)
    served = through_server(export_dir, texts, backend, threads, **load)
    return {"suite": "serve", "backend": backend, "in_process": direct, "server": served,
            "server_over_in_process": served["texts_per_s"] / direct["texts_per_s"]}


def run(ctx) -> list[dict]:
    """The suite: `senti serve` under a concurrent loopback load against the in-process Predictor (CPU only)."""
    if ctx.device == "gpu":
        return []
    config = ctx.config
    texts = [e.text for e in ctx.splits.dev][: config.infer_texts]
    load = dict(clients=32, requests=300 if config.quick else 1000, texts_per_request=4)
    record = bench_serving(ctx.export_dir, texts, backend="onnx", threads=ctx.threads, **load)
    ctx.say(f"serve: {record['server']['texts_per_s']:.0f} texts/s through HTTP, "
            f"{record['in_process']['texts_per_s']:.0f} in process ({record['server_over_in_process']:.0%})")
    return [record]


def report(results) -> list[str]:
    lines = []
    for r in results.by_suite("serve"):
        s, d = r["server"], r["in_process"]
        lines += ["", "## Serving", "", f"In process (Predictor, batch 32): {d['texts_per_s']:,.0f} texts/s. "
                  f"Through `senti serve` ({s['clients']} clients, {s['requests']} requests of "
                  f"{s['texts_per_request']} texts, {s['errors']} errors): {s['texts_per_s']:,.0f} texts/s "
                  f"({r['server_over_in_process']:.0%} of in process), latency p50 {s['latency_ms']['p50']:.1f} ms, "
                  f"p95 {s['latency_ms']['p95']:.1f} ms, p99 {s['latency_ms']['p99']:.1f} ms; mean model batch "
                  f"{s['mean_model_batch']:.1f} texts."]
    return lines
