"""The model a server answers with, and how a new one takes its place: loaded beside it (checked as every door
checks an export, `senti.serving.export_folder`), then swapped in between batches; a failed load leaves the old
model serving and is remembered for `/readyz` and the page."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from senti.core.errors import SentiError

log = logging.getLogger("senti.serve")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


class ModelSlot:
    def __init__(self, predictor, load=None):
        self.predictor = predictor  # read once per batch: a reload swaps models between batches, never inside one
        self.loaded_at = _now()
        self.last_reload: dict | None = None
        self._load = load
        self._lock = asyncio.Lock()

    async def reload(self, trigger: str) -> dict:
        """Load the export anew beside the serving model and swap it in; the record of what happened."""
        async with self._lock:
            started = time.perf_counter()
            record: dict[str, Any] = {"trigger": trigger, "at": _now()}
            try:
                if self._load is None:
                    raise SentiError("this server was started without a way to reload its model")
                fresh = await asyncio.get_running_loop().run_in_executor(None, self._load)
            except Exception as err:  # a broken export: the old model keeps serving
                record.update(ok=False, error=f"{type(err).__name__}: {err}"[:500], serving=self.predictor.version)
                log.error("reload (%s) failed, still serving %s: %s", trigger, self.predictor.version,
                          record["error"])
            else:
                old = self.predictor.version
                self.predictor, self.loaded_at = fresh, _now()
                record.update(ok=True, serving=fresh.version, previous=old,
                              seconds=round(time.perf_counter() - started, 2))
                log.warning("reload (%s): now serving %s (was %s)", trigger, fresh.version, old)
            self.last_reload = record
            return record
