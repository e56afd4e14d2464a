"""The experiment scripts behind the results pages (`experiments/`, outside the installed package): each imports,
and each command-line one answers --help, run from the repository's root as the pages say."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import experiments

ROOT = Path(__file__).resolve().parents[2]

MODULES = sorted(m.name for m in pkgutil.iter_modules(experiments.__path__))


def test_the_experiments_are_there():
    assert {"batch_cut", "inprocess_ab", "pretrain_curve", "serve_profile", "student_speed", "surge_loop",
            "tokenizer_speed"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_each_experiment_imports_and_explains_itself(name):
    module = importlib.import_module(f"experiments.{name}")
    assert module.__doc__ and "python -m experiments." + name in module.__doc__
    if module.__file__ and "argparse" in open(module.__file__, encoding="utf-8").read():
        result = subprocess.run([sys.executable, "-m", f"experiments.{name}", "--help"],
                                capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert result.returncode == 0 and "usage" in result.stdout, result.stderr[-2000:]
