"""Servers a measurement starts: their output must never block them."""

import sys
import tempfile
from pathlib import Path

import httpx

from senti.benchmarks.local_server import free_port, launch, output_of, wait_ready

# Logs 256 kB (four times what a pipe holds) before it listens, then answers until stopped.
CHATTY_SERVER = """
import http.server, sys
for _ in range(256):
    sys.stderr.write("x" * 1023 + "\\n")
sys.stderr.write("listening\\n"); sys.stderr.flush()
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
http.server.HTTPServer(("127.0.0.1", {port}), Ok).serve_forever()
"""


def test_a_server_that_logs_more_than_a_pipe_holds_still_starts():
    port = free_port()
    proc = launch([sys.executable, "-c", CHATTY_SERVER.format(port=port)])
    try:
        wait_ready(proc, f"http://127.0.0.1:{port}/", timeout_s=30)
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text == "ok"
        assert "listening\n" in output_of(proc, last=None)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_launched_server_leaves_no_log_file_behind():
    logs = Path(tempfile.gettempdir())
    before = set(logs.glob("senti-server-*.log"))
    proc = launch([sys.executable, "-c", "print('started', flush=True)"])
    proc.wait(timeout=30)
    assert set(logs.glob("senti-server-*.log")) == before  # failed before: one more file per launch, never removed
    assert output_of(proc) == "started\n"
