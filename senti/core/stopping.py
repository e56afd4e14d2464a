"""Stopping long work on a signal at safe points, so a killed command still cleans up after itself.

A Python signal handler that raises runs wherever the interpreter happens to be, including inside
callbacks of native libraries (paddle's to_static, ONNX Runtime), where unwinding can crash the process
instead of cleaning up. So the handler only records the signal; long loops call `checkpoint()` between
steps, and that raises `SystemExit(128 + signal)` where unwinding is safe: staging folders and partial
files are removed by the `except BaseException` blocks that own them. Loops that wind down on their own
(training, pretraining, bench suites) record SIGINT as well (`INTERRUPTS`) and ask `signal_name()` between
steps instead. Either way a stopped command exits with the shell's 128 + signal (130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

_received: list[int] = []


def checkpoint() -> None:
    """Raise SystemExit(128 + signal) if a stop was requested (no-op otherwise)."""
    if _received:
        raise SystemExit(128 + _received[0])


def requested() -> int | None:
    """The signal that asked for a stop, if any."""
    return _received[0] if _received else None


def signal_name() -> str | None:
    """The name of the signal that asked for a stop (SIGINT, SIGTERM), if any."""
    return signal.Signals(_received[0]).name if _received else None


def exit_code() -> int:
    """The shell's code for a command stopped by the signal received (130 when none was)."""
    return 128 + (_received[0] if _received else signal.SIGINT)


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)  # what stops training: Ctrl-C, or a scheduler's kill


@contextmanager
def stop_at_checkpoints(signals=(signal.SIGTERM,)):
    """Within the block, `signals` are recorded for `checkpoint()` instead of killing the process. A stop recorded
    by an earlier block is forgotten; outside the main thread (where Python installs no handlers) nothing changes."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, lambda signum, frame: _received.append(signum)) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
