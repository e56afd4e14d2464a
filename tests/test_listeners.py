"""The suite's own guard: a test during which anything of this process tree listens beyond loopback fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.listens_beyond_loopback("runs a probe test that listens on every interface, to see the guard catch it")
def test_a_test_listening_on_every_interface_fails(tmp_path):
    probe = ROOT / "tests" / f"test_probe_{tmp_path.name}.py"
    probe.write_text("import socket, time\n\n\ndef test_probe():\n    s = socket.socket()\n"
                     "    s.bind(('0.0.0.0', 0))\n    s.listen()\n    time.sleep(0.6)\n    s.close()\n",
                     encoding="utf-8")
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    assert run.returncode != 0 and "listening beyond loopback during this test" in run.stdout, run.stdout[-2000:]
    assert "0.0.0.0" in run.stdout
