"""A cheap load generator for `senti serve`, run in its own process: raw asyncio HTTP/1.1 keep-alive clients
(no client library), a fixed number of requests, so it stops by itself. Loopback only.

    python senti/benchmarks/loadgen.py SPEC.json   ->   JSON on stdout: wall seconds, latencies, errors, own CPU-seconds
"""

import asyncio
import json
import sys
import time


async def _client(port: int, bodies: list[bytes], extra: str, latencies: list, errors: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for body in bodies:
        head = (f"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n{extra}\r\n").encode()
        started = time.perf_counter()
        writer.write(head + body)
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        length = 0
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        await reader.readexactly(length)
        latencies.append(time.perf_counter() - started)
        if status != 200:
            errors.append(status)
    writer.close()


def main(spec_file: str) -> None:
    spec = json.loads(open(spec_file, encoding="utf-8").read())
    texts, clients, per = spec["texts"], spec["clients"], spec["texts_per_request"]
    bodies = [json.dumps({"texts": [texts[(n * per + k) % len(texts)] for k in range(per)]}).encode()
              for n in range(spec["requests"])]
    extra = "".join(f"{k}: {v}\r\n" for k, v in spec.get("headers", {}).items())
    latencies: list[float] = []
    errors: list[str] = []

    async def run():
        await asyncio.gather(*(_client(spec["port"], bodies[c::clients], extra, latencies, errors)
                               for c in range(clients)))

    started = time.perf_counter()
    asyncio.run(run())
    wall = time.perf_counter() - started
    print(json.dumps({"wall_seconds": wall, "latencies": latencies, "errors": errors, "cpu_seconds": time.process_time()}))


if __name__ == "__main__":
    main(sys.argv[1])
