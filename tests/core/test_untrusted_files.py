"""Files that must not open doors (issue 12): checkpoints are safetensors, and a pickle runs nothing unless
the user passes --trust-pickle."""

from __future__ import annotations

import os
import pickle
import shutil

import pytest
from helpers import train_tiny

from senti.core import layout
from senti.core.errors import SentiError


class RunsCode:
    """A pickle that runs a shell command when loaded, as a hostile .pdparams would."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_checkpoints_are_safetensors_and_a_pickle_runs_nothing_without_trust_pickle(tiny_checkpoint, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    ckpt, data = tiny_checkpoint
    assert (ckpt / layout.PADDLENLP_SAFE_WEIGHTS).is_file() and not (ckpt / layout.PADDLENLP_WEIGHTS).exists()
    hostile = tmp_path / "hostile"
    shutil.copytree(ckpt, hostile)
    (hostile / layout.PADDLENLP_SAFE_WEIGHTS).unlink()
    marker = tmp_path / "code-ran"
    with open(hostile / layout.PADDLENLP_WEIGHTS, "wb") as fh:
        pickle.dump({"weights": RunsCode(marker)}, fh)
    runner = CliRunner()
    for args in (["eval", "--model", str(hostile)],
                 ["export", "--model", str(hostile), "--output-dir", str(tmp_path / "export")],
                 ["distill", "--teacher", str(hostile), "--dataset", str(data), "--output-dir", str(tmp_path / "s")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "--trust-pickle" in result.output and "Traceback" not in result.output, args
        assert not marker.exists(), f"{args[0]} loaded the pickle"
    with pytest.raises(SentiError, match="its weights are a pickle"):
        train_tiny(tmp_path / "continued", data, model=str(hostile))
    assert not marker.exists()


def _dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_prediction_files_bom_and_bad_outputs(_exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    runner = CliRunner()
    src = tmp_path / "in.tsv"
    src.write_bytes("\ufefftext\tid\n非常好很满意\t1\n".encode())
    dst = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["predict", "--model", str(out), "--backend", "onnx", "--input", str(src),
                                 "--output", str(dst)])
    assert result.exit_code == 0, result.output
    assert '"text": "非常好很满意"' in dst.read_text(encoding="utf-8")
    txt = tmp_path / "in.txt"
    txt.write_bytes("\ufeff非常好很满意\n".encode())
    result = runner.invoke(app, ["predict", "--model", str(out), "--input", str(txt), "--output", str(dst)])
    assert result.exit_code == 0 and '"text": "非常好很满意"' in dst.read_text(encoding="utf-8")
    (tmp_path / "folder.jsonl").mkdir()
    for output, message in [(tmp_path / "missing" / "o.jsonl", "does not exist"),
                            (tmp_path / "folder.jsonl", "is a folder"),
                            (txt.with_suffix(".tsv"), "is the input file")]:
        result = runner.invoke(app, ["predict", "--model", str(out), "--input", str(txt.with_suffix(".tsv")
                                                                                  if "input" in message else txt),
                                     "--output", str(output)])
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, message


def test_stale_work_of_killed_runs_is_removed_and_said(_exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    dead = _dead_pid()
    stale = tmp_path / f".out.jsonl.partial-{dead}-out"
    stale.write_text("half", encoding="utf-8")
    live = tmp_path / f".out.jsonl.partial-{os.getppid()}-out"  # a running process's: never touched
    live.write_text("busy", encoding="utf-8")
    src = tmp_path / "in.txt"
    src.write_text("非常好很满意\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--input", str(src), "--output",
                                      str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    assert not stale.exists() and live.exists() and "earlier run that was killed" in result.output


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
