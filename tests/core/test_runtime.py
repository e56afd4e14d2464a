"""The runtime record says whether the thread and MKL settings were in force when paddle loaded."""

import json
import subprocess
import sys

SCRIPT = """
import json, sys
from senti.core.runtime import configure_runtime, runtime_record
configure_runtime({first})
import paddle
configure_runtime({second})
print(json.dumps(runtime_record()))
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
