"""`serving.placement`: workers x threads from the cores a process may use (its cgroup quota included) and the
model's width; what `senti serve` picks when not told, and says."""

from __future__ import annotations

import json

import pytest

from senti.core.runtime import available_cores, cgroup_cpu_quota
from senti.serving import export_folder
from senti.serving.placement import choose_placement, model_width
from tests.helpers import output_of, start_senti


@pytest.mark.parametrize("cores, width, workers, threads", [
    (2, 128, 2, 1),  # a small student: one single-threaded worker a core (measured: README)
    (2, 312, 2, 1),  # so is a 312-wide model (measured with a socket per worker: README)
    (2, 512, 1, 2),  # wider models share a call between threads (the rule's guess)
    (16, 768, 4, 4),
    (1, 768, 1, 1),  # never more threads than cores
    (2, None, 1, 2),  # an export that does not record its width is taken as wide
])
def test_the_layout_follows_the_cores_and_the_width(cores, width, workers, threads):
    placement = choose_placement(cores, width)
    assert (placement.workers, placement.threads) == (workers, threads)
    assert placement.workers * placement.threads <= cores


def test_options_win_over_the_rule():
    assert (choose_placement(8, 128, workers=2).threads, choose_placement(8, 128, threads=4).workers) == (4, 2)
    assert choose_placement(8, 128, workers=3, threads=3).why == "as asked"


def test_the_cgroup_quota_bounds_the_cores(tmp_path, monkeypatch):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_quota(str(tmp_path)) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(str(tmp_path)) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota(str(v1)) == 1.0
    monkeypatch.setattr("senti.core.runtime.CGROUP_ROOT", str(v1))
    assert available_cores() == 1  # a container's --cpus 1, whatever the host has


def test_serve_picks_the_layout_and_says_why(_exported):
    """Without --workers/--threads `senti serve` spreads the model by the rule above and says so at start-up."""
    import signal

    out, _ = _exported
    width = model_width(export_folder.read_meta(out)[0])
    assert width == json.loads((out / "export.json").read_text(encoding="utf-8"))["model"]["hidden_size"]
    expected = choose_placement(available_cores(), width)
    proc, _ = start_senti("serve", "--model", str(out), "--backend", "onnx")
    try:
        line = output_of(proc).splitlines()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert (f"with {expected.workers} worker(s) x {expected.threads} thread(s) ({available_cores()} cores, "
            f"{expected.threads} thread(s) a call for a {width}-wide model") in line, line
