"""A local Ray started by `senti predict --engine ray` (no --address) listens on loopback only."""

from __future__ import annotations

import json
import threading

import pytest

ray = pytest.importorskip("ray", reason="Ray Data is the optional 'scale' extra")
psutil = pytest.importorskip("psutil")

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def _listening(pids: set[int]) -> set[tuple[str, str]]:
    found = set()
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            try:
                name = psutil.Process(conn.pid).name()
            except psutil.Error:
                name = "?"
            found.add((name, conn.laddr.ip))
    return found


def test_local_ray_listens_on_loopback_only(_exported, tmp_path):
    from senti.serving.ray_predict import RayJob, predict_with_ray

    out, _ = _exported
    if ray.is_initialized():
        ray.shutdown()
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps({"id": i, "text": "非常好很满意"}) for i in range(500)) + "\n",
                   encoding="utf-8")
    seen, done = set(), threading.Event()

    def watch():  # bounded: stops when the run ends, sampling every 0.2 s
        while not done.wait(0.2):
            tree = psutil.Process().children(recursive=True)
            seen.update(_listening({psutil.Process().pid, *(p.pid for p in tree)}))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = predict_with_ray(out, str(src), str(tmp_path / "out.jsonl"), RayJob(id_column="id", backend="onnx"))
        tree = psutil.Process().children(recursive=True)
        seen.update(_listening({psutil.Process().pid, *(p.pid for p in tree)}))
    finally:
        done.set()
        watcher.join(10)
        ray.shutdown()
    assert result["rows_out"] == 500
    names = {name for name, _ in seen}
    assert {"gcs_server", "raylet"} <= names, seen  # the sampling did see Ray's servers
    assert all(ip in LOOPBACK for _, ip in seen), sorted(seen)
