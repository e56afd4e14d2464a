"""What senti hides of the libraries' logs by default."""

from __future__ import annotations

import logging


def test_the_libraries_info_lines_are_hidden_and_errors_still_show(monkeypatch):
    """httpx's "HTTP Request: POST ..." INFO lines reached the quickstart's output from the bench's serve suite
    through PaddleNLP's root handler (before)."""
    from senti.toolkit.logs import quiet_libraries

    monkeypatch.delenv("SENTI_VERBOSE", raising=False)
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.INFO)  # as a library the bench loads leaves the root logger
    quiet_libraries()
    for name in ("httpx", "paddle", "onnxruntime"):
        assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING
