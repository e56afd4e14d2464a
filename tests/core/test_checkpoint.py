"""senti.core.checkpoint: checkpoints are safetensors, and a pickle runs nothing unless the user passes
--trust-pickle."""

from __future__ import annotations

import os
import pickle
import shutil

import pytest

from senti.core import layout
from senti.core.errors import SentiError
from tests.helpers import train_tiny


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
