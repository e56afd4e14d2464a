"""Drift signals: how the texts being scored compare with the data the model was checked on.

The same four figures are counted by `senti serve` (in /metrics), printed by `senti predict` for a file,
and recorded for the dev (parity) texts at export time, so a dashboard or a person can see traffic move
away from the training data: top-class confidence, predicted labels, texts truncated, and the share of
tokens outside the vocabulary ([UNK]).
"""

from __future__ import annotations

from collections import Counter

LOW_CONFIDENCE = 0.7  # a top-class probability below this counts as unsure
CONFIDENCE_BUCKETS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)


class DriftCounter:
    """Running drift figures over predictions seen one at a time (bounded memory, for streamed files)."""

    def __init__(self):
        self.n = self.low = self.truncated = self.tokens = self.unknown = 0
        self.confidence = 0.0
        self.labels: Counter = Counter()
        self.histogram = [0] * len(CONFIDENCE_BUCKETS)  # texts per confidence bucket (upper bounds)

    def add(self, p) -> None:
        if p is None:  # an error row
            return
        self.n += 1
        self.low += p.score < LOW_CONFIDENCE
        self.confidence += p.score
        self.histogram[next((i for i, bound in enumerate(CONFIDENCE_BUCKETS) if p.score <= bound),
                            len(CONFIDENCE_BUCKETS) - 1)] += 1
        self.labels[p.label] += 1
        self.truncated += bool(p.truncated)
        self.tokens += p.tokens
        self.unknown += p.unknown_tokens

    def summary(self) -> dict:
        n = self.n
        return {
            "texts": n,
            "low_confidence_share": self.low / n if n else 0.0,
            "mean_confidence": self.confidence / n if n else 0.0,
            "label_shares": {lab: c / n for lab, c in sorted(self.labels.items())} if n else {},
            "truncated_share": self.truncated / n if n else 0.0,
            "unknown_token_share": self.unknown / self.tokens if self.tokens else 0.0,
            "confidence_histogram": {"upper_bounds": list(CONFIDENCE_BUCKETS),
                                     "shares": [c / n if n else 0.0 for c in self.histogram]},
        }


def summarize(predictions) -> dict:
    """Drift figures of a list of `Prediction`s (None entries, error rows, are left out)."""
    counter = DriftCounter()
    for p in predictions:
        counter.add(p)
    return counter.summary()


def describe(here: dict, reference: dict | None = None) -> list[str]:
    """Lines such as "confidence below 0.7: 4.0% on dev, 31.0% here"."""
    def pair(key: str, label: str) -> str:
        now = f"{100 * here[key]:.1f}% here"
        return f"{label}: {100 * reference[key]:.1f}% on dev, {now}" if reference and key in reference else \
            f"{label}: {now}"

    lines = [pair("low_confidence_share", f"confidence below {LOW_CONFIDENCE}"),
             pair("truncated_share", "texts truncated"),
             pair("unknown_token_share", "tokens outside the vocabulary ([UNK])")]
    shares = ", ".join(f"{lab} {100 * share:.1f}%" for lab, share in here["label_shares"].items())
    ref = reference.get("label_shares") if reference else None
    lines.append(f"predicted labels here: {shares}" + (
        "; on dev: " + ", ".join(f"{lab} {100 * s:.1f}%" for lab, s in ref.items()) if ref else ""))
    return lines
