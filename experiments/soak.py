"""A bounded soak of `senti serve --workers N` on loopback: moderate load for --minutes, a SIGHUP reload every
--reload-every seconds, a share of hostile requests; the server tree's RSS sampled throughout.

    python -m experiments.soak --model EXPORT [--minutes 30] [--workers 2] [--clients 4] [--pause-ms 20]
        [--reload-every 300] [--hostile 0.1] [--output report.json]

Counts, for the ordinary requests: answers that are not 200 or whose transport failed (lost) and labels that differ
from what the same export answers in this process (wrong); for the hostile ones (bodies that are not JSON, nested
thousands deep, of the wrong type, not UTF-8, a megabyte of spaces): answers outside 4xx/200. RSS: the sum over
the supervisor and its workers, every 10 s; flat means the median of the last five minutes within 50 MB of the
median of the first five after start-up.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import threading
import time
from collections import Counter
from pathlib import Path

from senti.benchmarks.local_server import start_senti

HOSTILE = [
    ("not JSON", b"{texts: ["),
    ("nested deep", b'{"texts": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"),
    ("wrong type", b'{"texts": "one text, not a list"}'),
    ("not UTF-8", b'{"texts": ["\xff\xfe"]}'),
    ("a megabyte of spaces", json.dumps({"texts": [" " * 1_000_000 + "好"]}).encode()),
    ("no texts", b'{"texts": []}'),
]


def tree_rss_mb(pid: int) -> float:
    import psutil

    root = psutil.Process(pid)
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--pause-ms", type=float, default=20.0, help="each client's pause between requests")
    parser.add_argument("--reload-every", type=float, default=300.0)
    parser.add_argument("--hostile", type=float, default=0.1, help="share of hostile requests")
    parser.add_argument("--backend", default="onnx")
    parser.add_argument("--texts", default=None, help="a .tsv/.jsonl/.txt of texts to send (default: synthetic)")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    import httpx

    from senti.serving import Predictor

    texts = _texts(args.texts)
    reference = Predictor.load(args.model, backend=args.backend)
    expected = {t: p.label for t, p in zip(texts, reference.predict(texts))}
    proc, base = start_senti(["serve", "--model", args.model, "--workers", str(args.workers), "--threads", "1",
                              "--backend", args.backend])
    started = time.monotonic()
    stop_at = started + args.minutes * 60
    counts: Counter = Counter()
    hostile_codes: Counter = Counter()
    lost: list[str] = []
    lock = threading.Lock()

    def client(seed: int):
        rng = random.Random(seed)
        with httpx.Client(base_url=base, timeout=60) as http:
            while time.monotonic() < stop_at:
                if rng.random() < args.hostile:
                    name, body = rng.choice(HOSTILE)
                    code: int | str
                    try:
                        code = http.post("/v1/predict", content=body,
                                         headers={"Content-Type": "application/json"}).status_code
                    except httpx.HTTPError as err:
                        code = type(err).__name__
                    with lock:
                        hostile_codes[f"{name}: {code}"] += 1
                        counts["hostile"] += 1
                        if not (code == 200 or isinstance(code, int) and 400 <= code < 500):
                            counts["hostile_unexpected"] += 1
                else:
                    batch = rng.sample(texts, rng.randint(1, 8))
                    try:
                        reply = http.post("/v1/predict", json={"texts": batch})
                        ok = reply.status_code == 200
                        why = "" if ok else f"HTTP {reply.status_code}"
                    except httpx.HTTPError as err:
                        ok, why = False, repr(err)
                    with lock:
                        counts["ordinary"] += 1
                        if not ok:
                            counts["lost"] += 1
                            lost.append(why)
                            continue
                        wrong = sum(r["label"] != expected[t] for t, r in zip(batch, reply.json()["predictions"]))
                        counts["wrong_labels"] += wrong
                        counts["texts"] += len(batch)
                time.sleep(args.pause_ms / 1000)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
    for t in threads:
        t.start()
    rss: list[tuple[float, float]] = []
    reloads: list[dict] = []
    next_reload = started + args.reload_every
    try:
        while time.monotonic() < stop_at:
            now = time.monotonic()
            rss.append((round(now - started, 1), round(tree_rss_mb(proc.pid), 1)))
            if now >= next_reload and now < stop_at - 30:
                before = httpx.get(f"{base}/readyz", timeout=30).json().get("reload")
                proc.send_signal(signal.SIGHUP)
                record = _await_reload(httpx, base, before)
                reloads.append({"at_s": round(now - started), **(record or {"ok": False, "error": "no outcome"})})
                next_reload += args.reload_every
            time.sleep(10)
    finally:
        for t in threads:
            t.join(timeout=120)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    first = [m for s, m in rss if s <= 300] or [rss[0][1]]
    last = [m for s, m in rss if s >= rss[-1][0] - 300] or [rss[-1][1]]
    report = {
        "minutes": args.minutes, "workers": args.workers, "clients": args.clients, "backend": args.backend,
        "requests": dict(counts), "lost_examples": lost[:5], "hostile": dict(hostile_codes), "reloads": reloads,
        "rss_mb": {"first_5_min_median": statistics.median(first), "last_5_min_median": statistics.median(last),
                   "max": max(m for _, m in rss), "samples": rss},
    }
    report["rss_mb"]["growth"] = round(report["rss_mb"]["last_5_min_median"] - report["rss_mb"]["first_5_min_median"],
                                       1)
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "rss_mb"}, indent=1))
    print(json.dumps({k: v for k, v in report["rss_mb"].items() if k != "samples"}))
    return report


def _await_reload(httpx, base: str, before, timeout_s: float = 300):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            record = httpx.get(f"{base}/readyz", timeout=30).json().get("reload")
        except httpx.HTTPError:
            record = None
        if record and record != before:
            return record
        time.sleep(1)
    return None


def _texts(path: str | None) -> list[str]:
    if path:
        from senti.core.rows import read_rows

        texts = [r.text for r in read_rows(Path(path)) if r.text and r.error is None]
        return list(dict.fromkeys(texts))[:2000]
    rng = random.Random(0)
    words = ["很好", "满意", "推荐", "太差", "失望", "退货", "还行", "一般", "物流快", "包装破"]
    return list(dict.fromkeys("".join(rng.choices(words, k=rng.randint(1, 6))) for _ in range(500)))


if __name__ == "__main__":
    main()
