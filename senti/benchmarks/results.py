"""`results.json` of a `senti bench` run: its schema, and the writer that saves after every measurement."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from senti.core import layout
from senti.core.artifacts import ArtifactMeta, JSONValue, Setting


@dataclass
class BenchResults(ArtifactMeta):
    FILE: ClassVar[str] = layout.BENCH_RESULTS
    KIND: ClassVar[str] = "bench output"

    config: dict[str, Setting]  # the bench's settings as run
    environment: dict[str, Setting]  # the machine and the libraries (senti.benchmarks.timing.environment)
    records: list[dict[str, JSONValue]]  # each suite's measurements, shaped by the suite (its report reads them)
    meta_version: int = layout.META_VERSION
    started: str = ""
    suite_seconds: dict[str, float] = field(default_factory=dict)
    wall_seconds: float | None = None

    def problem(self) -> str | None:
        if not isinstance(self.records, list) or not all(isinstance(r, dict) and "suite" in r for r in self.records):
            return "records must be a list of objects, each naming its suite"
        return None

    def by_suite(self, suite: str) -> list[dict]:
        return [r for r in self.records if r["suite"] == suite]


class ResultsWriter:
    """Keeps results.json current: rewritten (atomically) after each measurement, so Ctrl-C keeps what was measured."""

    def __init__(self, folder: Path, config: dict, env: dict):
        self.folder = Path(folder)
        self.data = BenchResults(config=config, environment=env, records=[],
                                 started=time.strftime("%Y-%m-%dT%H:%M:%S"))

    @property
    def records(self) -> list[dict]:
        return self.data.records

    def add(self, records) -> None:
        env = self.data.environment
        for r in records if isinstance(records, list) else [records]:
            name, threads = env.get("gpu") or env.get("cpu_model"), env.get("omp_num_threads")
            self.data.records.append({**r, "device_name": name if isinstance(name, str) else None,
                                      "threads": threads if isinstance(threads, str) else None})
        self.save()

    def save(self) -> None:
        self.data.write(self.folder)
