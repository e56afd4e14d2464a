"""senti.core.stopping: a signal is read between steps; SIGTERM leaves no partial output and no staging folder."""

from __future__ import annotations

import os

import pytest


@pytest.mark.slow
def test_sigterm_removes_partial_output_and_export_staging(_exported, tiny_checkpoint, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out, _ = _exported
    ckpt, _ = tiny_checkpoint
    src = tmp_path / "big.txt"
    src.write_text("非常好很满意，物流也很快\n" * 200_000, encoding="utf-8")
    cli = [sys.executable, "-m", "senti.cli"]
    runs = [(cli + ["predict", "--model", str(out), "--backend", "onnx", "--input", str(src), "--output",
                    str(tmp_path / "scored.jsonl")], ".scored.jsonl.partial-"),
            (cli + ["export", "--model", str(ckpt), "--output-dir", str(tmp_path / "exported")], ".exported.staging-")]
    for command, work in runs:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(work + "*")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, output
        assert not list(tmp_path.glob(work + "*")), f"{command[3]} left {work}* behind"
    assert not (tmp_path / "scored.jsonl").exists() and not (tmp_path / "exported").exists()


def test_a_signal_is_recorded_between_steps_and_ends_the_step_loop_at_a_checkpoint():
    import signal

    from senti.core import stopping

    with stopping.stop_at_checkpoints(stopping.INTERRUPTS):
        stopping.checkpoint()  # nothing asked yet: no-op
        os.kill(os.getpid(), signal.SIGTERM)  # recorded, not fatal
        assert stopping.signal_name() == "SIGTERM" and stopping.exit_code() == 128 + signal.SIGTERM
        with pytest.raises(SystemExit) as stopped:
            stopping.checkpoint()
        assert stopped.value.code == 128 + signal.SIGTERM
    with stopping.stop_at_checkpoints():
        assert stopping.requested() is None  # an earlier block's stop is forgotten
