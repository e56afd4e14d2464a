"""One-text latency of `senti serve` while clients send 1 MB texts, and the server's memory.

    python -m experiments.big_text_load --model EXPORT [--clients 16] [--threads 1]

Starts `senti serve --backend onnx` on loopback, times 20 one-text requests on a quiet server, then 10 while
`--clients` clients each send a 1 MB text in a loop, and reports medians and the server's RSS (idle, peak,
two seconds after the load stops).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

BIG = "good product " * 80_000  # 1.04 MB, inside the default 1 MB body limit with JSON's quotes


def main() -> None:
    import httpx
    import psutil

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    from senti.benchmarks.local_server import start_senti

    server, base = start_senti(["serve", "--model", args.model, "--backend", "onnx", "--threads", str(args.threads),
                                "--api-key-env", "BIG_TEXT_KEY"], env={**os.environ, "BIG_TEXT_KEY": "k"})
    proc = psutil.Process(server.pid)

    def rss() -> int:
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) >> 20

    async def one(http) -> float:
        started = time.perf_counter()
        response = await http.post("/v1/predict", json={"texts": ["这个产品非常好用"]})
        assert response.status_code == 200, response.text
        return time.perf_counter() - started

    async def run():
        async with httpx.AsyncClient(base_url=base, headers={"X-API-Key": "k"}, timeout=300) as http:
            idle = rss()
            quiet = [await one(http) for _ in range(20)]
            stop = asyncio.Event()

            async def flood() -> int:
                sent = 0
                while not stop.is_set():
                    await http.post("/v1/predict", json={"texts": [BIG]})
                    sent += 1
                return sent

            tasks = [asyncio.create_task(flood()) for _ in range(args.clients)]
            await asyncio.sleep(1)
            loaded, peak = [], 0
            for _ in range(10):
                loaded.append(await one(http))
                peak = max(peak, rss())
            stop.set()
            sent = sum(await asyncio.gather(*tasks))
            await asyncio.sleep(2)
            print(f"idle RSS {idle} MB; one-text median quiet {1000 * statistics.median(quiet):.1f} ms; with "
                  f"{args.clients} clients of 1 MB texts median {1000 * statistics.median(loaded):.1f} ms, max "
                  f"{1000 * max(loaded):.1f} ms; peak RSS {peak} MB, {rss()} MB two seconds after; {sent} big texts")

    try:
        asyncio.run(run())
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
