"""Requests lost by keep-alive clients while `senti serve --workers N` reloads on SIGHUP.

    python -m experiments.sighup_keepalive --model EXPORT [--workers 2] [--clients 16]
        [--seconds 30] [--sighups 2]

Clients hold their connections open (httpx's pool) and send one-text requests back to back on loopback; SIGHUP
goes to the supervisor at evenly spaced times, so each worker retires while its connections are in use. Counts
every answer that is not a 200 and every transport error, and the model versions seen. Bounded: it stops after
--seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from collections import Counter

from senti.benchmarks.local_server import start_senti


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--sighups", type=int, default=2)
    args = parser.parse_args(argv)
    import httpx

    proc, base = start_senti(["serve", "--model", args.model, "--workers", str(args.workers), "--threads", "1"])
    outcomes: Counter = Counter()
    versions: Counter = Counter()

    async def client(stop_at: float):
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            while time.monotonic() < stop_at:
                try:
                    answer = await http.post("/v1/predict", json={"texts": ["这个酒店很干净，服务也好"]})
                    outcomes[str(answer.status_code)] += 1
                    if answer.status_code == 200:
                        versions[answer.json()["model_version"]] += 1
                except httpx.TransportError as err:
                    outcomes[type(err).__name__] += 1

    async def reloads(started: float):
        for k in range(1, args.sighups + 1):
            await asyncio.sleep(max(0.0, started + k * args.seconds / (args.sighups + 1) - time.monotonic()))
            proc.send_signal(signal.SIGHUP)

    async def run():
        started = time.monotonic()
        await asyncio.gather(reloads(started), *(client(started + args.seconds) for _ in range(args.clients)))

    try:
        asyncio.run(run())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    report = {"requests": sum(outcomes.values()), "outcomes": dict(outcomes), "lost": sum(
        n for k, n in outcomes.items() if k != "200"), "model_versions": len(versions), **vars(args)}
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
