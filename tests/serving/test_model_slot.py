"""senti.serving.model_slot: a reload swaps models under load without losing a request."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from typing import Any

import httpx

from senti.core import layout
from tests.helpers import (
    AUTH,
    assert_one_reload_shape,
    export_tiny,
    running_server,
    train_tiny,
)


def test_reload_swaps_models_under_load_without_losing_a_request(_exported, tiny_checkpoint, tmp_path):
    """SIGHUP and the admin endpoint both swap in a re-exported model between batches; a broken export leaves
    the old one serving and says why; the admin endpoint wants the API key."""
    out, _ = _exported
    ckpt, data = tiny_checkpoint
    live = tmp_path / "live"
    shutil.copytree(out, live)
    retrained = train_tiny(tmp_path / "retrained", data, seed=99, epochs=1)  # different weights: another version
    assert retrained["best"]
    with running_server(live, "--max-wait-ms", "20") as (base, proc):
        first = httpx.get(f"{base}/readyz").json()["model_version"]
        results: dict[str, Any] = {"codes": [], "versions": set()}

        stop = {"at": time.monotonic() + 120}  # bounded whatever happens; moved up once the swap is seen

        async def load():  # 8 clients on loopback until 2 s after the new model answers
            async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
                async def client():
                    while time.monotonic() < stop["at"]:
                        r = await http.post("/v1/predict", json={"texts": ["非常好很满意", "太差了很失望"]})
                        results["codes"].append(r.status_code)
                        if r.status_code == 200:
                            results["versions"].add(r.json()["model_version"])
                            if r.json()["model_version"] != first and stop["at"] - time.monotonic() > 2:
                                stop["at"] = time.monotonic() + 2
                await asyncio.gather(*(client() for _ in range(8)))

        async def reload_during_load():
            task = asyncio.create_task(load())
            await asyncio.sleep(1.0)
            await asyncio.to_thread(export_tiny, tmp_path / "retrained", live, overwrite=True)  # replaces the folder
            proc.send_signal(signal.SIGHUP)
            await task

        asyncio.run(reload_during_load())
        second = httpx.get(f"{base}/readyz").json()
        assert second["model_version"] != first and second["reload"]["ok"] and second["reload"]["trigger"] == "SIGHUP"
        assert results["codes"] and set(results["codes"]) == {200}, "a request failed during the reload"
        assert results["versions"] == {first, second["model_version"]}
        assert httpx.post(f"{base}/v1/admin/reload").status_code == 401
        (live / layout.ONNX_FILES["onnx"]).write_bytes(b"not a model")  # a broken export
        broken = httpx.post(f"{base}/v1/admin/reload", headers=AUTH)
        assert broken.status_code == 409 and broken.json()["serving"] == second["model_version"]
        ready = httpx.get(f"{base}/readyz").json()
        assert ready["model_version"] == second["model_version"] and ready["reload"]["ok"] is False
        assert ready["reload"]["error"]
        assert_one_reload_shape(ready["reload"], "admin")
        assert httpx.get(f"{base}/v1/status", headers=AUTH).json()["reload"] == ready["reload"]
        answer = httpx.post(f"{base}/v1/predict", json={"texts": ["非常好很满意"]}, headers=AUTH)
        assert answer.status_code == 200 and answer.json()["model_version"] == second["model_version"]
