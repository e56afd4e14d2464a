"""What `senti serve` counts: the Prometheus objects of `/metrics`, and the drift figures the page at `/` draws."""

from __future__ import annotations

import threading

from senti.serving.drift import CONFIDENCE_BUCKETS, DriftCounter

MAX_ASPECT_SERIES = 1000  # distinct aspect names in /metrics (each with 4 polarities); a team's lists hold tens
OTHER_ASPECTS = "(other)"  # no aspect can be named so (senti.core.aspects.NAME)


class ServerMetrics:
    """One registry per app (so tests and several apps in a process never share counters)."""

    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry = CollectorRegistry()
        self.requests = Counter("senti_requests", "HTTP responses to /v1/predict by status", ["status"],
                                registry=registry)
        self.errors = Counter("senti_errors", "Failed /v1/predict requests by reason", ["reason"], registry=registry)
        self.latency = Histogram("senti_request_latency_seconds", "Latency of /v1/predict", registry=registry,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.batch_sizes = Histogram("senti_batch_size", "Model inputs (texts, or windows of long texts) per batch "
                                     "the batcher hands the model", registry=registry,
                                     buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
        self.model_seconds = Histogram("senti_model_seconds", "Seconds per model call", registry=registry)
        self.queue_depth = Gauge("senti_queue_depth", "Model inputs waiting or being scored", registry=registry)
        self.texts = Counter("senti_texts", "Texts scored", registry=registry)
        self.windows = Counter("senti_windows", "Model inputs scored (a text, or each of its windows)",
                               registry=registry)
        self.model_calls = Counter("senti_model_calls", "Calls into the runtime (a batcher's batch is cut by length "
                                   "into calls of at most --max-batch-size)", registry=registry)
        self.model_positions = Counter("senti_model_positions", "Token positions given to the model: real tokens, "
                                       "or padding", ["kind"], registry=registry)
        # Drift: when these move away from the dev figures in export.json, traffic no longer looks like training
        # data.
        self.confidence = Histogram("senti_confidence", "Top-class probability of each text scored",
                                    registry=registry, buckets=CONFIDENCE_BUCKETS)
        self.predicted = Counter("senti_predicted", "Texts scored by predicted label", ["label"], registry=registry)
        # A rising share of unsure answers (below the export's abstention threshold) is a drift signal too.
        self.unsure = Counter("senti_unsure", "Answers below the export's abstention threshold, by model version",
                              ["model_version"], registry=registry)
        self.truncated = Counter("senti_truncated_texts", "Texts longer than max_seq_len", registry=registry)
        self.tokens = Counter("senti_tokens", "Word pieces in the texts scored", registry=registry)
        self.unknown = Counter("senti_unknown_tokens", "Word pieces outside the vocabulary ([UNK])",
                               registry=registry)
        # /v1/aspects: the aspect names come from the requests, so the label values are bounded (MAX_ASPECT_SERIES)
        self.aspect_answers = Counter("senti_aspect_answers", "Aspect answers of /v1/aspects by aspect and polarity "
                                      f"(aspects past the first {MAX_ASPECT_SERIES} named are counted as "
                                      f"{OTHER_ASPECTS!r})", ["aspect", "polarity"], registry=registry)
        self._aspects_seen: set[str] = set()
        self._traffic, self._lock = DriftCounter(), threading.Lock()  # the page's figures since start-up

    def on_batch(self, cost: int, seconds: float) -> None:
        self.batch_sizes.observe(cost)
        self.model_seconds.observe(seconds)
        self.windows.inc(cost)

    def on_calls(self, before: dict, after: dict) -> None:
        """Count the model calls one batch took, from the predictor's tally before and after it."""
        self.model_calls.inc(after["calls"] - before["calls"])
        self.model_positions.labels("token").inc(after["tokens"] - before["tokens"])
        self.model_positions.labels("padding").inc(after["padding"] - before["padding"])

    def observe(self, predictions, model_version: str = "") -> None:
        """Count the predictions of one model call (from the batcher's thread) by the model `model_version`."""
        self.texts.inc(len(predictions))
        self.unsure.labels(model_version).inc(sum(1 for p in predictions if p.unsure))
        with self._lock:
            for p in predictions:
                self._traffic.add(p)
        for p in predictions:
            self.confidence.observe(p.score)
            self.predicted.labels(p.label).inc()
            self.truncated.inc(p.truncated)
            self.tokens.inc(p.tokens)
            self.unknown.inc(p.unknown_tokens)

    def on_aspects(self, answers: list[dict]) -> None:
        """Count one /v1/aspects response's answers ({aspect name: AspectAnswer} per text)."""
        for row in answers:
            for name, answer in row.items():
                self.aspect_answers.labels(self._aspect_series(name), answer.polarity).inc()

    def _aspect_series(self, name: str) -> str:
        """`name`, or OTHER_ASPECTS once MAX_ASPECT_SERIES names have been seen: a client sending new aspect names
        on every request cannot grow /metrics without bound."""
        with self._lock:
            if name in self._aspects_seen or len(self._aspects_seen) < MAX_ASPECT_SERIES:
                self._aspects_seen.add(name)
                return name
        return OTHER_ASPECTS

    def traffic(self) -> dict:
        """The drift figures (senti.serving.drift) of every text scored since start-up."""
        with self._lock:
            return self._traffic.summary()

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
