"""Serving suite: what `senti serve` costs beyond the model, in CPU-seconds per text and in wall-clock.

Efficiency = CPU-seconds per text in process / CPU-seconds per text through the server, the server's
CPU summed over its process tree (workers included) and read from the OS, for the same model, backend
and texts in one run; 1.0 means the HTTP layer costs nothing. On a 2-core machine a wall-clock ratio
also measures the load generator, so that runs in its own process (`loadgen.py`, raw asyncio sockets)
and its CPU share is reported beside. Everything talks to 127.0.0.1 and stops by itself.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from senti.benchmarks.local_server import free_port, launch, wait_ready
from senti.benchmarks.markdown import number, table
from senti.benchmarks.timing import summarize

LOADGEN = Path(__file__).resolve().parent / "loadgen.py"


def _tree_cpu(pid: int) -> float:
    """User + system CPU-seconds of a process and all its descendants, from the OS."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def in_process(export_dir: Path, texts: list[str], batch_size: int, threads: int, repeats: int = 3,
               ort_spinning: bool = False) -> dict:
    """The same texts scored by a Predictor in this process: texts/s and CPU-seconds per text (medians). ONNX
    Runtime's spinning is set as the server sets it (off by default), so both sides run the same runtime: with
    it on, busy-waiting threads count as CPU in process (figures before this round did that)."""
    from senti.core.batching import new_tally, padding_share
    from senti.serving import Predictor

    predictor = Predictor.load(export_dir, threads=threads, ort_spinning=ort_spinning)
    predictor.predict(texts[:batch_size], batch_size=batch_size)
    predictor.tally = new_tally()
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        predictor.predict(texts, batch_size=batch_size)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return {"texts": len(texts), "backend": predictor.backend_name, "texts_per_s": len(texts) / float(np.median(walls)),
            "cpu_s_per_text": float(np.median(cpus)) / len(texts), "padding_share": padding_share(predictor.tally),
            "mean_call_rows": predictor.tally["rows"] / max(predictor.tally["calls"], 1)}


def _model_counts(base: str) -> dict | None:
    """The server's model-call counters from /metrics (every worker's, when one answers for all)."""
    import httpx

    counts = {"calls": 0.0, "rows": 0.0, "tokens": 0.0, "padding": 0.0}
    for line in httpx.get(f"{base}/metrics", timeout=30).text.splitlines():
        if line.startswith("senti_model_calls_total"):
            counts["calls"] += float(line.split()[-1])
        elif line.startswith("senti_model_positions_total"):
            counts["tokens" if 'kind="token"' in line else "padding"] += float(line.split()[-1])
        elif line.startswith("senti_windows_total"):
            counts["rows"] += float(line.split()[-1])
    return counts if counts["calls"] else None  # a build without these counters


@dataclass
class Load:
    """The load the clients send: `requests` requests of `texts_per_request` texts from `clients` clients, and the
    batcher's settings the server is started with."""

    clients: int = 32
    requests: int = 2000
    texts_per_request: int = 4
    max_batch_size: int = 32
    max_wait_ms: float = 5.0


@dataclass
class Server:
    """How the server is started. `workers=None` leaves workers x threads to `senti serve` (its default layout,
    recorded as `placement`); `serve_command` replaces `senti serve` (another build, to compare; only the common
    options are passed, and with `default_layout` not even --threads: each build's own default); `while_loaded(pid)`
    runs beside the load (a profiler, say)."""

    workers: int | None = None
    ort_spinning: bool = False
    serve_command: list[str] | None = None
    env: dict | None = None
    cwd: str | None = None
    default_layout: bool = False
    while_loaded: Callable | None = None


def _command(export_dir: Path, threads: int, port: int, load: Load, server: Server) -> tuple[list[str], int, Any]:
    """(the server's command line, its workers, the placement senti serve chose or None)."""
    from senti.core.runtime import available_cores
    from senti.serving import export_folder
    from senti.serving.placement import placement_for

    chosen = server.workers is None and not server.serve_command  # another build is measured on one worker
    placement = placement_for(export_folder.read_meta(export_dir)[0], available_cores()) if chosen else None
    workers = placement.workers if placement else (server.workers or 1)
    common = ["--model", str(export_dir), "--port", str(port), "--max-batch-size", str(load.max_batch_size),
              "--max-wait-ms", str(load.max_wait_ms), "--max-queue", str(load.clients * load.texts_per_request * 4)]
    if not chosen and not server.default_layout:
        common += ["--threads", str(max(1, threads // workers))]
    command = (server.serve_command + common) if server.serve_command else (
        [sys.executable, "-m", "senti.cli", "serve", *common, *([] if chosen else ["--workers", str(workers)]),
         "--ort-spinning" if server.ort_spinning else "--no-ort-spinning"])
    return command, workers, placement


def _drive(proc, port: int, texts: list[str], load: Load, server: Server, workers: int) -> dict:
    """Warm the server's `workers` up, run the load generator against it; what it measured, the server's
    CPU-seconds, its /metrics text and (with one worker of senti serve's) the model calls it made."""
    import httpx

    base = f"http://127.0.0.1:{port}"
    for _ in range(4 * workers):  # warm-up, every worker
        httpx.post(f"{base}/v1/predict", json={"texts": texts[:load.max_batch_size]}, timeout=60)
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"port": port, "clients": load.clients, "requests": load.requests,
                                    "texts_per_request": load.texts_per_request, "texts": texts}), encoding="utf-8")
        # With several workers (or a build's own layout, unknown here) each answers for itself alone.
        counted = workers == 1 and not server.default_layout
        counts_before = _model_counts(base) if counted else None
        cpu_before = _tree_cpu(proc.pid)
        side = server.while_loaded(proc.pid) if server.while_loaded else None
        ran = subprocess.run([sys.executable, str(LOADGEN), str(spec)], capture_output=True, text=True, timeout=1800)
        server_cpu = _tree_cpu(proc.pid) - cpu_before
        if side is not None:
            side.wait(timeout=120)
    if ran.returncode != 0:
        raise RuntimeError(f"load generator failed: {ran.stderr[-2000:]}")
    counts_after = _model_counts(base) if counts_before else None
    counts = ({k: v - counts_before[k] for k, v in counts_after.items()} if counts_before and counts_after else None)
    return {"result": json.loads(ran.stdout), "server_cpu": server_cpu, "metrics": httpx.get(f"{base}/metrics").text,
            "counts": counts}


def through_server(export_dir: Path, texts: list[str], threads: int, load: Load | None = None,
                   server: Server | None = None) -> dict:
    """Start `senti serve` on loopback (as `server` says), send it `load` from the clients' own process, stop it."""
    load, server = load or Load(), server or Server()
    port = free_port()
    command, workers, placement = _command(export_dir, threads, port, load, server)
    proc = launch(command, env=server.env, cwd=server.cwd)
    try:
        wait_ready(proc, f"http://127.0.0.1:{port}/readyz")
        got = _drive(proc, port, texts, load, server, workers)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    result, server_cpu, counts = got["result"], got["server_cpu"], got["counts"]
    batches = [float(line.split()[-1]) for line in got["metrics"].splitlines()
               if line.startswith(("senti_batch_size_count", "senti_batch_size_sum"))]
    texts_sent = load.requests * load.texts_per_request
    wall = result["wall_seconds"]
    return {"clients": load.clients, "requests": load.requests, "texts_per_request": load.texts_per_request,
            "workers": workers, "threads": placement.threads if placement else max(1, threads // workers),
            "placement": {"workers": placement.workers, "threads": placement.threads, "why": placement.why}
            if placement else None,
            "ort_spinning": server.ort_spinning, "errors": len(result["errors"]), "wall_seconds": wall,
            "requests_per_s": load.requests / wall, "texts_per_s": texts_sent / wall,
            "latency_ms": summarize(result["latencies"]), "server_cpu_s_per_text": server_cpu / texts_sent,
            "loadgen_cpu_share": result["cpu_seconds"] / (result["cpu_seconds"] + server_cpu),
            "mean_model_batch": batches[1] / max(batches[0], 1) if len(batches) == 2 else None,
            "padding_share": counts["padding"] / max(counts["tokens"] + counts["padding"], 1) if counts else None,
            "mean_call_rows": counts["rows"] / max(counts["calls"], 1) if counts else None}


def bench_serving(export_dir: Path, texts: list[str], threads: int = 2, shape: str = "", load: Load | None = None,
                  server: Server | None = None) -> dict:
    """In process and through the server, on the same texts, in one run; efficiency in CPU and wall-clock."""
    load, server = load or Load(), server or Server()
    sent = [texts[(n * load.texts_per_request + k) % len(texts)]
            for n in range(load.requests) for k in range(load.texts_per_request)]
    direct = in_process(export_dir, sent, load.max_batch_size, threads, ort_spinning=server.ort_spinning)
    served = through_server(export_dir, texts, threads, load, server)
    return {"suite": "serve", "shape": shape, "backend": direct["backend"], "in_process": direct, "server": served,
            "server_over_in_process": served["texts_per_s"] / direct["texts_per_s"],
            "cpu_efficiency": direct["cpu_s_per_text"] / served["server_cpu_s_per_text"]}


def run(ctx) -> list[dict]:
    """The suite: the bench's model and the 3l-128h student shape; 1 and 2 workers and spinning on the student."""
    from senti.benchmarks.models import STUDENT_SHAPE, student_export

    if ctx.device == "gpu":
        return []
    config = ctx.config
    texts = [e.text for e in ctx.splits.dev][: config.infer_texts]
    load = Load(clients=32, requests=300 if config.quick else 1000, texts_per_request=4)
    exports = {config.model: ctx.export_dir}
    if not config.quick and config.model != STUDENT_SHAPE:
        exports[STUDENT_SHAPE] = student_export(ctx)
    variants = [(shape, Server()) for shape in exports]  # senti serve's default layout
    if not config.quick:  # measured on the smallest model, where the layers around it weigh most
        student = STUDENT_SHAPE if STUDENT_SHAPE in exports else config.model
        variants += [(student, Server(workers=1)), (student, Server(workers=1, ort_spinning=True))]
    records = []
    for shape, server in variants:
        record = bench_serving(exports[shape], texts, ctx.threads, shape, load, server)
        s = record["server"]
        ctx.say(f"serve {shape} ({s['workers']} worker(s), spinning {'on' if s['ort_spinning'] else 'off'}): "
                f"CPU efficiency {record['cpu_efficiency']:.2f}, {s['texts_per_s']:.0f} texts/s through HTTP against "
                f"{record['in_process']['texts_per_s']:.0f} in process ({record['server_over_in_process']:.0%})")
        records.append(record)
    return records


def report(results) -> list[str]:
    rows = []
    for r in results.by_suite("serve"):
        s, d = r["server"], r["in_process"]
        layout = f"{s.get('workers', 1)} x {s.get('threads', '?')}{' (default)' if s.get('placement') else ''}"
        rows.append([r.get("shape", ""), r["backend"], layout, "on" if s.get("ort_spinning") else "off",
                     number(d["texts_per_s"], 0), number(s["texts_per_s"], 0), f"{r['server_over_in_process']:.0%}",
                     f"{1e3 * d['cpu_s_per_text']:.3f}" if "cpu_s_per_text" in d else "—",
                     f"{1e3 * s['server_cpu_s_per_text']:.3f}" if "server_cpu_s_per_text" in s else "—",
                     f"{r['cpu_efficiency']:.2f}" if "cpu_efficiency" in r else "—",
                     f"{s['loadgen_cpu_share']:.0%}" if "loadgen_cpu_share" in s else "—",
                     f"{s['latency_ms']['p50']:.1f} / {s['latency_ms']['p95']:.1f} / {s['latency_ms']['p99']:.1f}",
                     s["errors"], number(s.get("mean_model_batch")), _share(d.get("padding_share")),
                     _share(s.get("padding_share")), number(d.get("mean_call_rows")), number(s.get("mean_call_rows"))])
    if not rows:
        return []
    first = results.by_suite("serve")[0]["server"]
    return ["", "## Serving", "", f"{first['clients']} loopback clients, {first['requests']} requests of "
            f"{first['texts_per_request']} texts each, from a load generator in its own process; in process: a "
            "Predictor on the same texts, batch 32. CPU efficiency = CPU-seconds per text in process / CPU-seconds "
            "per text of the server's process tree (workers included), from the OS.", "",
            table(["shape", "backend", "workers x threads", "ORT spinning", "in process texts/s", "server texts/s", "wall ratio",
                   "CPU ms/text in process", "CPU ms/text server", "CPU efficiency", "load generator CPU share",
                   "p50 / p95 / p99 ms", "errors", "mean batcher batch", "padding in process", "padding served",
                   "rows per call in process", "rows per call served"], rows)]


def _share(value) -> str:
    return "—" if value is None else f"{value:.1%}"
