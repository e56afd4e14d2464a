"""The Ray suite's accounting of CPU by process."""

import subprocess
import sys
import time

from senti.benchmarks.ray_load import _ProcessWatch

BURN = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\n"


def test_a_process_that_ends_during_the_run_is_still_counted():
    with _ProcessWatch(every_s=0.2) as watch:
        proc = subprocess.Popen([sys.executable, "-c", BURN])
        proc.wait(timeout=60)
        time.sleep(0.5)  # the process is gone before the run ends, as a finished Ray actor is
    name, cpu = watch.seen[proc.pid]  # failed before: the reading at the end did not hold it
    assert cpu >= 0.5 and name.startswith("python")
