"""The runtime record says whether the thread and MKL settings were in force when paddle loaded; a Paddle Inference
run leaves them in force."""

import json
import subprocess
import sys

import pytest

SCRIPT = """
import json, sys
from senti.core.runtime import configure_runtime, runtime_record
configure_runtime({first})
import paddle
configure_runtime({second})
print(json.dumps(runtime_record().to_json()))
"""


def record_after(first: int, second: int) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(first=first, second=second)], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_second_call_that_changes_nothing_keeps_the_first_answer():
    # As `senti train`/`pretrain` do: the command sets the runtime before paddle loads, the run calls again after.
    record = record_after(1, 1)
    assert record["set_before_paddle_import"] is True
    assert record["omp_num_threads"] == "1"


def test_a_change_after_paddle_loaded_is_said():
    record = record_after(1, 2)
    assert record["set_before_paddle_import"] is False
    assert record["omp_num_threads"] == "2"


def test_a_paddle_inference_run_leaves_mkls_threads_as_they_were(tmp_path):
    """Paddle Inference's predictor.run() set the MKL inside Paddle's wheel to one thread for the whole process,
    after which every dynamic-graph matmul (senti bench's training suite included) ran on one core."""
    import numpy as np
    import paddle
    from paddle.static import InputSpec

    from senti.core import layout
    from senti.core.runtime import paddle_mkl, paddle_openmp
    from senti.serving.backends import PaddleBackend

    mkl = paddle_mkl()
    if mkl is None:
        pytest.skip("this Paddle wheel has no MKL")
    layer = paddle.nn.Linear(8, 2)
    specs = [InputSpec([None, None], "int64", "input_ids"), InputSpec([None, None], "int64", "token_type_ids")]

    class Tiny(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = paddle.nn.Embedding(10, 8)
            self.out = layer

        def forward(self, input_ids, token_type_ids):
            return self.out(self.embed(input_ids + token_type_ids).mean(axis=1))

    paddle.jit.save(Tiny(), str(tmp_path / layout.PADDLE_PREFIX), input_spec=specs)
    openmp = paddle_openmp()
    before, before_openmp = mkl.MKL_Get_Max_Threads(), openmp.omp_get_max_threads()
    mkl.MKL_Set_Num_Threads(2)
    openmp.omp_set_num_threads(2)
    try:
        backend = PaddleBackend(tmp_path, threads=2)
        logits = backend(np.ones((3, 4), np.int64), np.zeros((3, 4), np.int64))
        assert logits.shape == (3, 2)
        assert mkl.MKL_Get_Max_Threads() == 2
        assert openmp.omp_get_max_threads() == 2  # the threads of oneDNN's bfloat16 GEMM (CPU --amp)
    finally:
        mkl.MKL_Set_Num_Threads(before)
        openmp.omp_set_num_threads(before_openmp)


def test_warnings_after_paddles_quiet_import_still_reach_stderr():
    """import_paddle hides Paddle's import chatter in a buffer, and Paddle's import binds a root log handler to the
    stream of that moment: every later warning (the C kernels off, a failed reload) went into the buffer."""
    import subprocess
    import sys

    script = ("import logging\nfrom senti.core.runtime import import_paddle\nimport_paddle()\n"
              "logging.getLogger('senti.check').warning('the-warning-that-must-show')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "SENTI_VERBOSE": ""})
    assert done.returncode == 0, done.stderr
    assert "the-warning-that-must-show" in done.stderr
