"""`senti serve`: an HTTP API (FastAPI on uvicorn) over a `Predictor`, with dynamic batching and metrics.

Hostile input hurts nobody else: a text that cannot be scored gets 422 naming its index before it is
batched; limits count model inputs (windows), not texts; bodies over the limit get 413 with or without
Content-Length; slow senders get 408; work for a client that went away is dropped from the queue.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from fastapi import Request  # module level: FastAPI resolves the endpoints' string annotations here
from pydantic import BaseModel, ConfigDict, Field

from senti.core.errors import SentiError
from senti.serving.auth import key_accepted, page_guard
from senti.serving.batcher import Batcher, QueueFull
from senti.serving.console import add_pages
from senti.serving.http_guard import HEADER_TIMEOUT_ENV, PREDICT_PATH, Guard, HeaderTimeoutProtocol, HostGuard
from senti.serving.metrics import ServerMetrics
from senti.serving.model_slot import ModelSlot
from senti.serving.predictor import text_problem
from senti.serving.supervisor import STATUS_ENV, Supervisor, read_status, record_worker_failure, reuse_port_socket

log = logging.getLogger("senti.serve")


# Module level: FastAPI resolves these (string) annotations in the module's globals.
class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str] = Field(description="Texts to score, at most the server's max_texts")

class PredictionOut(BaseModel):
    label: str
    score: float = Field(description="Probability of the label, calibrated on dev when the export records a "
                                     "temperature (export.json's calibration)")
    probabilities: dict[str, float]
    unsure: bool = Field(description="The score is below the export's abstention threshold (export.json's abstain): "
                                     "a person should look; always false for an export without one")
    truncated: bool
    windows: int
    tokens: int
    unknown_tokens: int

class PredictResponse(BaseModel):
    labels: list[str]
    backend: str
    model_version: str = Field(description="Hash of the export that scored these texts (changes on reload)")
    predictions: list[PredictionOut]

class AspectsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str] = Field(description="Texts to answer, at most the server's max_texts")
    aspects: list[dict[str, Any]] = Field(description="The aspect list, as in an aspect file: "
                                                      "[{\"name\", \"label\", \"keywords\": [...]}, ...]")
    unit: str = Field("sentence", description="Evidence units: sentence, or clause (sentences cut at commas)")
    neutral_margin: float = Field(0.0, description="Scores within this of 0.5 are neutral")

class EvidenceOut(BaseModel):
    text: str
    start: int
    end: int
    keyword: str

class AspectAnswerOut(BaseModel):
    polarity: str = Field(description="positive, neutral, negative or not_mentioned")
    score: float | None = Field(description="Mean probability of the positive label over the evidence (a model "
                                            "with aspect heads: the aspect's probability of positive)")
    evidence: list[EvidenceOut]

class AspectsResponse(BaseModel):
    aspects: list[str]
    backend: str
    model_version: str
    answers: list[dict[str, AspectAnswerOut]] = Field(description="One {aspect name: answer} per text")


@dataclass
class ServerConfig:
    max_batch_size: int = 32  # model inputs per call
    max_wait_ms: float = 5.0
    max_queue: int = 2048  # model inputs waiting before new requests get 503
    max_texts: int = 256  # per request
    max_windows: int = 512  # model inputs per request (long texts scored in windows take several)
    max_body_bytes: int = 1 << 20
    body_timeout_s: float = 10.0  # a client must send its whole body within this, else 408
    header_timeout_s: float = 10.0  # and its request line and headers within this, else the connection closes
    api_key: str | None = None

    def __post_init__(self):
        for name in ("max_batch_size", "max_queue", "max_texts", "max_windows", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise SentiError(f"{name} must be at least 1; got {getattr(self, name)}")
        for name in ("max_wait_ms", "body_timeout_s", "header_timeout_s"):
            if not getattr(self, name) >= 0:
                raise SentiError(f"{name} must be at least 0; got {getattr(self, name)}")


@dataclass
class Scored:
    """Predictions with the model (and so the version) that made them; the batcher hands each job its slice."""

    predictions: list
    model: object  # a Predictor

    def __len__(self) -> int:
        return len(self.predictions)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Scored(self.predictions[index], self.model)
        return self.predictions[index]


class PredictService:
    """What the routes do, apart from FastAPI's wiring: the model slot (serving.model_slot), the batcher, the
    metrics (serving.metrics), the limits of `config`, and readiness."""

    def __init__(self, predictor, config: ServerConfig, reload=None, supervisor_pid: int | None = None):
        self.config, self.supervisor_pid = config, supervisor_pid
        self.metrics = ServerMetrics()
        self.slot = ModelSlot(predictor, reload)
        self.ready = False
        self.batcher = Batcher(self.score, config.max_batch_size, config.max_wait_ms, config.max_queue,
                               self.metrics.on_batch)
        self.metrics.queue_depth.set_function(lambda: self.batcher.pending)

    def score(self, texts) -> Scored:
        """One batcher batch, in its thread: the predictions and the model that made them."""
        model = self.slot.predictor  # read once: every text of this batch is scored by one model
        before = dict(model.tally)
        results = model.predict(texts, batch_size=self.config.max_batch_size)  # cut by length into calls
        self.metrics.on_calls(before, model.tally)
        self.metrics.observe(results, model.version)
        return Scored(results, model)

    @asynccontextmanager
    async def lifespan(self, app):
        self.batcher.start()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.slot.reload("SIGHUP")))
        self.ready = True
        yield
        loop.remove_signal_handler(signal.SIGHUP)
        self.ready = False  # uvicorn has finished the requests in flight before this point
        await self.batcher.stop()

    def fail(self, status: int, reason: str, detail, headers=None) -> NoReturn:
        from fastapi import HTTPException

        self.metrics.errors.labels(reason).inc()
        raise HTTPException(status, detail=detail, headers=headers)

    def authorize(self, authorization: str | None, x_api_key: str | None) -> None:
        if not key_accepted(self.config.api_key, x_api_key, authorization):
            self.fail(401, "unauthorized", "missing or wrong API key", {"WWW-Authenticate": "Bearer"})

    def status(self) -> dict:
        """The page's figures (/v1/status)."""
        model = self.slot.predictor
        return {"model_version": model.version, "backend": model.backend_name, "labels": model.labels,
                "max_seq_len": model.max_seq_len, "long_text": model.long_text, "loaded_at": self.slot.loaded_at,
                "reload": self.last_reload(), "traffic": self.metrics.traffic(),
                "reference": model.meta.reference_stats.to_json() if model.meta.reference_stats else None}

    async def invalid(self, request: Request, exc):
        """422 for a body that does not validate. FastAPI's default echoes each offending input, which fails on
        values JSON cannot hold (Infinity parses but does not serialize) and repeats large bodies: where and why."""
        from fastapi.responses import JSONResponse

        self.metrics.errors.labels("invalid").inc()
        detail = [{"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in exc.errors()]
        return JSONResponse({"detail": detail}, status_code=422)

    def _limit_texts(self, texts: list[str]) -> None:
        """The request's count of texts and each text's form (413/422 name what is wrong and where): refused
        before batching, so a bad text never shares a model call with another client's texts."""
        config = self.config
        if len(texts) > config.max_texts:
            self.fail(413, "too_many_texts", f"{len(texts)} texts; at most {config.max_texts} per request")
        bad = [{"type": "invalid_text", "loc": ["body", "texts", i], "msg": why}
               for i, text in enumerate(texts) if (why := text_problem(text))]
        if bad:
            self.fail(422, "invalid_text", bad)

    async def _checked(self, model, texts: list[str]):
        """(the texts as `model` checked them, model inputs per text), after the request's limits (413/422 name
        what is over). Each text is checked and tokenized here once: the batch scores what this found."""
        config = self.config
        checked, windows = await asyncio.get_running_loop().run_in_executor(None, model.checked, texts) \
            if model.long_text == "window" else model.checked(texts)
        over = [{"type": "too_many_windows", "loc": ["body", "texts", i], "msg": why}
                for i, why in model.window_problems(texts, windows).items()]
        if over:
            self.fail(413, "too_many_windows", over)
        if sum(windows) > config.max_windows:
            self.fail(413, "too_many_windows", f"{sum(windows)} model inputs (windows); at most "
                                               f"{config.max_windows} per request")
        return checked, windows

    async def _scored(self, model, texts: list[str], request: Request):
        """(the model that scored, its predictions) of `texts` through the batcher, after the limits; None when
        the client left (its work is dropped from the queue)."""
        checked, windows = await self._checked(model, texts)
        if not texts:
            return model, []
        job = asyncio.ensure_future(self.batcher.submit(checked, sum(windows)))
        gone = asyncio.ensure_future(_client_gone(request))
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not job.done():
            job.cancel()
            self.metrics.errors.labels("client_gone").inc()
            return None
        gone.cancel()
        try:
            scored = job.result()
        except QueueFull:
            self.fail(503, "queue_full", "server busy: queue full", {"Retry-After": "1"})
        except Exception as err:
            self.fail(500, "model", f"model call failed: {type(err).__name__}")
        return scored.model, scored.predictions

    async def predict(self, texts: list[str], request: Request):
        """POST /v1/predict after authorization: limits, the batcher, the answer (499 when the client left)."""
        started = time.perf_counter()
        self._limit_texts(texts)
        done = await self._scored(self.slot.predictor, texts, request)
        if done is None:
            return _json_response(None, 499)
        scored_by, results = done
        self.metrics.latency.observe(time.perf_counter() - started)
        return _json_response({"labels": scored_by.labels, "backend": scored_by.backend_name,
                               "model_version": scored_by.version, "predictions": [r.to_json() for r in results]})

    async def aspects(self, body: AspectsRequest, request: Request):
        """POST /v1/aspects after authorization: the aspect list read as an aspect file is (one line naming the
        entry at fault), the texts' limits, then each mentioning unit scored once through the batcher."""
        from senti.core.aspects import parse_aspects
        from senti.serving.aspects import aspect_pieces, assemble_scored, check_settings

        model = self.slot.predictor
        try:
            aspects = parse_aspects(body.aspects, "aspects")
            check_settings(model.labels, body.unit, body.neutral_margin, aspects)
        except SentiError as err:
            self.fail(422, "invalid_aspects", str(err))
        self._limit_texts(body.texts)
        found, pieces = aspect_pieces(body.texts, aspects, body.unit, model.labels)
        done = await self._scored(model, pieces, request)
        if done is None:
            return _json_response(None, 499)
        scored_by, results = done
        if scored_by.labels != model.labels:  # a reload swapped the model between the check and the scoring
            self.fail(503, "reloaded", "the model was replaced while this request was scored; send it again")
        answers = assemble_scored(body.texts, found, aspects, scored_by.labels,
                                  {p: r.probabilities for p, r in zip(pieces, results)}, body.neutral_margin)
        self.metrics.on_aspects(answers)
        return _json_response({"aspects": [a.name for a in aspects], "backend": scored_by.backend_name,
                               "model_version": scored_by.version,
                               "answers": [{k: v.to_json() for k, v in row.items()} for row in answers]})

    async def admin_reload(self):
        """POST /v1/admin/reload after authorization."""
        from fastapi.responses import JSONResponse

        if self.supervisor_pid is not None:  # one worker cannot reload the others: say so rather than split traffic
            self.fail(409, "workers", "this server runs several worker processes and this route reaches only one; "
                                      f"send SIGHUP to the supervisor (kill -HUP {self.supervisor_pid}) to reload "
                                      "them all")
        record = await self.slot.reload("admin")
        return JSONResponse(record, status_code=200 if record["ok"] else 409)

    def last_reload(self, supervised: dict | None = None) -> dict | None:
        """The last reload's record (model_slot.ReloadRecord): under workers the supervisor reloads (SIGHUP) and
        restarts, and what it last did is in its status folder; one process reloads itself."""
        if self.supervisor_pid is None:
            return self.slot.last_reload
        return (read_status() if supervised is None else supervised).get("reload")

    def readiness(self):
        from fastapi.responses import JSONResponse

        if not (self.ready and self.batcher.running):
            return JSONResponse({"status": "not ready"}, status_code=503)
        model = self.slot.predictor
        supervised = read_status() if self.supervisor_pid is not None else {}
        return {"status": "ready", "backend": model.backend_name, "model_version": model.version,
                "reload": self.last_reload(supervised),
                **({"workers": supervised["workers"]} if "workers" in supervised else {})}


def _json_response(payload, status: int = 200):
    """Encoded here, once: FastAPI would validate the response against its model and re-encode every probability
    through jsonable_encoder, a per-request cost next to a small model's (the schema stays in the OpenAPI docs
    through response_model)."""
    from fastapi.responses import Response

    if payload is None:
        return Response(status_code=status)
    return Response(json.dumps(payload, ensure_ascii=False, separators=(",", ":")), media_type="application/json",
                    status_code=status)


async def _client_gone(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def create_app(predictor, config: ServerConfig, reload=None, supervisor_pid: int | None = None):
    """The ASGI app: POST /v1/predict, POST /v1/aspects, GET/HEAD /healthz, /readyz, GET /metrics, POST /v1/admin/reload, a page
    for people at / (its figures at /v1/status), and OpenAPI docs at /docs, all without internet.
    `reload()` loads the export anew (a new `Predictor`); SIGHUP calls it too. `supervisor_pid`: this app is one
    of several worker processes under that supervisor, whose SIGHUP is the only way to reload them all.
    Returns (the guarded ASGI app, the FastAPI app)."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError

    service = PredictService(predictor, config, reload, supervisor_pid)
    app = FastAPI(title="senti", version="1", lifespan=service.lifespan, docs_url=None, redoc_url=None,  # console.py
                  description=f"Chinese sentiment analysis: labels {predictor.labels}, backend {predictor.backend_name}")
    add_pages(app, service.status, page_guard(config.api_key, "senti"))
    app.add_exception_handler(RequestValidationError, service.invalid)

    _scoring_routes(app, service)
    _admin_and_probe_routes(app, service, config)
    guarded = Guard(app, config.max_body_bytes, config.body_timeout_s,
                    lambda status: service.metrics.requests.labels(str(status)).inc())
    return guarded, app


def _scoring_routes(app, service: PredictService) -> None:
    """POST /v1/predict and /v1/aspects, each after authorization."""
    from fastapi import Header

    @app.post(PREDICT_PATH, response_model=PredictResponse,
              responses={401: {"description": "missing or wrong API key"}, 413: {"description": "too large"},
                         422: {"description": "invalid body, or a text that cannot be scored (its index named)"},
                         503: {"description": "queue full; retry after the Retry-After seconds"}})
    async def predict(body: PredictRequest, request: Request, authorization: str | None = Header(None),
                      x_api_key: str | None = Header(None)):
        service.authorize(authorization, x_api_key)
        return await service.predict(body.texts, request)

    @app.post("/v1/aspects", response_model=AspectsResponse,
              responses={401: {"description": "missing or wrong API key"}, 413: {"description": "too large"},
                         422: {"description": "invalid body, aspect list or text (the entry or index named)"},
                         503: {"description": "queue full; retry after the Retry-After seconds"}})
    async def aspects(body: AspectsRequest, request: Request, authorization: str | None = Header(None),
                      x_api_key: str | None = Header(None)):
        """Each text's answer on each aspect of the list sent with it (positive, neutral, negative or
        not_mentioned, with the evidence and its offsets); the list may change with every request."""
        service.authorize(authorization, x_api_key)
        return await service.aspects(body, request)


def _admin_and_probe_routes(app, service: PredictService, config: ServerConfig) -> None:
    """POST /v1/admin/reload (only with an API key), the probes /healthz and /readyz, and /metrics."""
    from fastapi import Header
    from fastapi.responses import Response
    from prometheus_client import CONTENT_TYPE_LATEST

    @app.post("/v1/admin/reload", responses={401: {"description": "missing or wrong API key"},
                                             409: {"description": "the new export failed; the old model serves"}})
    async def admin_reload(authorization: str | None = Header(None), x_api_key: str | None = Header(None)):
        """Load the export folder anew, check it, and swap it in between batches (as SIGHUP does)."""
        if config.api_key is None:  # anyone on the port could reload in a loop and halve the throughput
            service.fail(403, "admin_off", "the admin route needs an API key (senti serve --api-key-env NAME)")
        service.authorize(authorization, x_api_key)
        return await service.admin_reload()

    @app.api_route("/healthz", methods=["GET", "HEAD"])
    async def healthz():
        return {"status": "ok"}

    @app.api_route("/readyz", methods=["GET", "HEAD"])
    async def readyz():
        return service.readiness()

    @app.get("/metrics")
    async def prometheus_metrics():
        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


WORKER_SPEC_ENV = "SENTI_SERVE_WORKER_SPEC"  # how each worker process loads its model (JSON), set by serve()


def app_from_environment():
    """The app of one worker process (`--workers N`): its own Predictor and thread budget, from the spec the
    supervisor left in the environment (the API key stays in the variable the user named)."""
    from senti.serving.predictor import Predictor

    spec = json.loads(os.environ[WORKER_SPEC_ENV])
    api_key = os.environ.get(spec["api_key_env"]) if spec.get("api_key_env") else None

    def load():
        return Predictor.load(spec["model"], **spec["load"])

    try:
        predictor = load()
    except Exception as err:  # the supervisor reports why in /readyz, and retries with backoff
        record_worker_failure(err)
        raise SystemExit(1) from None  # said in one line above; multiprocessing prints no traceback for this
    # uvicorn set its SIGTERM/SIGINT handlers (finish the requests in flight, then stop) before it called this
    # factory; Paddle installs its own at the C level when it loads, which kills the worker mid-request. Putting
    # Python's handlers back in place at the C level restores uvicorn's.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.getsignal(sig))
    asgi, _ = create_app(predictor, ServerConfig(**spec["server"], api_key=api_key), load,
                         supervisor_pid=os.getppid())
    return HostGuard(asgi, spec.get("host", "127.0.0.1"))


def serve(predictor, config: ServerConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning",
          reload=None, workers: int = 1, worker_spec: dict | None = None):
    """Run until SIGINT/SIGTERM; uvicorn then stops accepting and finishes the requests in flight.

    `workers` > 1 starts that many processes sharing the port, each loading its own model per `worker_spec`
    ({"model", "load": Predictor.load options, "server": ServerConfig fields but the key, "api_key_env"}).
    """
    import uvicorn

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ[HEADER_TIMEOUT_ENV] = str(config.header_timeout_s)
    if workers > 1:
        os.environ[WORKER_SPEC_ENV] = json.dumps({**(worker_spec or {}), "host": host})
        status_dir = tempfile.mkdtemp(prefix="senti-serve-")  # 0700: the workers' shared status (supervisor.py)
        os.environ[STATUS_ENV] = status_dir
        settings = uvicorn.Config("senti.serving.server:app_from_environment", factory=True, workers=workers,
                                  host=host, port=port, log_level=log_level, access_log=False,
                                  timeout_graceful_shutdown=30, http=HeaderTimeoutProtocol)
        try:
            holder = reuse_port_socket(host, port)
        except OSError as err:
            shutil.rmtree(status_dir, ignore_errors=True)
            raise SentiError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
        try:
            Supervisor(settings, holder, Path(status_dir)).run()
        finally:
            holder.close()
            shutil.rmtree(status_dir, ignore_errors=True)
        return
    asgi, _ = create_app(predictor, config, reload)
    uvicorn.run(HostGuard(asgi, host), host=host, port=port, log_level=log_level, access_log=False, timeout_graceful_shutdown=30,
                http=HeaderTimeoutProtocol)
