"""`senti serve`: an HTTP API (FastAPI on uvicorn) over a `Predictor`, with dynamic batching and metrics."""

from __future__ import annotations

import hmac
import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from senti.serving.batcher import Batcher, QueueFull


# Module level: FastAPI resolves these (string) annotations in the module's globals.
class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str] = Field(description="Texts to score, at most the server's max_texts")

class PredictionOut(BaseModel):
    label: str
    score: float
    probabilities: dict[str, float]
    truncated: bool
    windows: int

class PredictResponse(BaseModel):
    labels: list[str]
    backend: str
    predictions: list[PredictionOut]


@dataclass
class ServerConfig:
    max_batch_size: int = 32
    max_wait_ms: float = 5.0
    max_queue: int = 2048  # texts waiting before new requests get 503
    max_texts: int = 256  # per request
    max_body_bytes: int = 1 << 20
    api_key: str | None = None


class BodyLimit:
    """Pure ASGI middleware: 413 once a request body passes the limit, with or without Content-Length."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await _send_json(send, 413, {"detail": f"request body over {self.limit} bytes"})
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _TooLarge:
            await _send_json(send, 413, {"detail": f"request body over {self.limit} bytes"})


class _TooLarge(Exception):
    pass


async def _send_json(send, status: int, body: dict) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


def create_app(predictor, config: ServerConfig):
    """The ASGI app: POST /v1/predict, GET /healthz, /readyz, /metrics, and OpenAPI docs at /docs."""
    from fastapi import FastAPI, Header, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    registry = CollectorRegistry()
    requests = Counter("senti_requests", "HTTP requests to /v1/predict by status", ["status"], registry=registry)
    errors = Counter("senti_errors", "Failed /v1/predict requests by reason", ["reason"], registry=registry)
    latency = Histogram("senti_request_latency_seconds", "Latency of /v1/predict", registry=registry,
                        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
    batch_sizes = Histogram("senti_batch_size", "Texts per model call", registry=registry,
                            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
    model_seconds = Histogram("senti_model_seconds", "Seconds per model call", registry=registry)
    queue_depth = Gauge("senti_queue_depth", "Texts waiting or being scored", registry=registry)
    texts_total = Counter("senti_texts", "Texts scored", registry=registry)

    def on_batch(size: int, seconds: float) -> None:
        batch_sizes.observe(size)
        model_seconds.observe(seconds)
        texts_total.inc(size)

    batcher = Batcher(lambda texts: predictor.predict(texts, batch_size=config.max_batch_size),
                      config.max_batch_size, config.max_wait_ms, config.max_queue, on_batch)
    queue_depth.set_function(lambda: batcher.pending)
    state = {"ready": False}

    @asynccontextmanager
    async def lifespan(app):
        batcher.start()
        state["ready"] = True
        yield
        state["ready"] = False  # uvicorn has finished the requests in flight before this point
        await batcher.stop()

    app = FastAPI(title="senti", version="1", lifespan=lifespan,
                  description=f"Chinese sentiment analysis: labels {predictor.labels}, backend {predictor.backend_name}")

    def fail(status: int, reason: str, detail: str, headers=None):
        errors.labels(reason).inc()
        requests.labels(str(status)).inc()
        raise HTTPException(status, detail=detail, headers=headers)

    async def invalid(request: Request, exc: RequestValidationError):
        # FastAPI's default echoes each offending input, which fails on values JSON cannot hold
        # (Infinity parses but does not serialize) and repeats large bodies: keep where and why only.
        errors.labels("invalid").inc()
        requests.labels("422").inc()
        detail = [{"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in exc.errors()]
        return JSONResponse({"detail": detail}, status_code=422)

    app.add_exception_handler(RequestValidationError, invalid)

    @app.post("/v1/predict", response_model=PredictResponse,
              responses={401: {"description": "missing or wrong API key"}, 413: {"description": "too large"},
                         503: {"description": "queue full; retry after the Retry-After seconds"}})
    async def predict(body: PredictRequest, authorization: str | None = Header(None),
                      x_api_key: str | None = Header(None)):
        started = time.perf_counter()
        if config.api_key is not None:
            given = x_api_key or (authorization[7:] if authorization and authorization.startswith("Bearer ") else "")
            if not hmac.compare_digest(given.encode(), config.api_key.encode()):
                fail(401, "unauthorized", "missing or wrong API key", {"WWW-Authenticate": "Bearer"})
        if len(body.texts) > config.max_texts:
            fail(413, "too_many_texts", f"{len(body.texts)} texts; at most {config.max_texts} per request")
        try:
            results = await batcher.submit(body.texts) if body.texts else []
        except QueueFull:
            fail(503, "queue_full", "server busy: queue full", {"Retry-After": "1"})
        except Exception as err:
            fail(500, "model", f"model call failed: {type(err).__name__}")
        requests.labels("200").inc()
        latency.observe(time.perf_counter() - started)
        return {"labels": predictor.labels, "backend": predictor.backend_name,
                "predictions": [r.to_json() for r in results]}

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz():
        if state["ready"] and batcher.running:
            return {"status": "ready", "backend": predictor.backend_name}
        return JSONResponse({"status": "not ready"}, status_code=503)

    @app.get("/metrics")
    async def metrics():
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return BodyLimit(app, config.max_body_bytes), app


def serve(predictor, config: ServerConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning"):
    """Run until SIGINT/SIGTERM; uvicorn then stops accepting and finishes the requests in flight."""
    import uvicorn

    asgi, _ = create_app(predictor, config)
    uvicorn.run(asgi, host=host, port=port, log_level=log_level, access_log=False,
                timeout_graceful_shutdown=30)
