"""The model a server answers with, and how a new one takes its place: loaded beside it (checked as every door
checks an export, `senti.serving.export_folder`), then swapped in between batches; a failed load leaves the old
model serving and is remembered for `/readyz` and the page."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from senti.core.errors import SentiError

log = logging.getLogger("senti.serve")


def timestamp() -> str:
    """The one time format of what the servers show (/readyz, /v1/status, the page): ISO 8601 in UTC, seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class ReloadRecord:
    """What the last reload did, one shape whether one process reloaded (`serving`, `previous`: model versions) or
    a supervisor replaced its workers (`workers_replaced`); a field that does not apply is None."""

    trigger: str
    ok: bool
    seconds: float
    at: str = ""
    error: str | None = None
    serving: str | None = None
    previous: str | None = None
    workers_replaced: int | None = None

    def __post_init__(self):
        self.at = self.at or timestamp()
        self.error = self.error[:500] if self.error else None

    def to_json(self) -> dict:
        return asdict(self)


class ModelSlot:
    def __init__(self, predictor, load=None):
        self.predictor = predictor  # read once per batch: a reload swaps models between batches, never inside one
        self.loaded_at = timestamp()
        self.last_reload: dict | None = None
        self._load = load
        self._lock = asyncio.Lock()

    async def reload(self, trigger: str) -> dict:
        """Load the export anew beside the serving model and swap it in; the record of what happened."""
        async with self._lock:
            started = time.perf_counter()
            try:
                if self._load is None:
                    raise SentiError("this server was started without a way to reload its model")
                fresh = await asyncio.get_running_loop().run_in_executor(None, self._load)
            except Exception as err:  # a broken export: the old model keeps serving
                record = ReloadRecord(trigger, False, round(time.perf_counter() - started, 2),
                                      error=f"{type(err).__name__}: {err}", serving=self.predictor.version)
                log.error("reload (%s) failed, still serving %s: %s", trigger, self.predictor.version, record.error)
            else:
                old = self.predictor.version
                self.predictor, self.loaded_at = fresh, timestamp()
                record = ReloadRecord(trigger, True, round(time.perf_counter() - started, 2), serving=fresh.version,
                                      previous=old)
                log.warning("reload (%s): now serving %s (was %s)", trigger, fresh.version, old)
            self.last_reload = record.to_json()
            return self.last_reload
