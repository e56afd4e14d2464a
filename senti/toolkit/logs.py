"""Quiet the libraries' start-up chatter so the user sees senti's own messages (SENTI_VERBOSE=1 shows it)."""

from __future__ import annotations

import logging
import warnings

from senti.core.runtime import import_paddle, verbose


def quiet_libraries() -> None:
    """Hide PaddleNLP's INFO logs, Paddle's import-time thread advice and import-time deprecation warnings;
    errors still show. Call after `configure_runtime`, which also quiets Paddle's glog."""
    if verbose():
        return
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import_paddle()
    from paddlenlp.utils.log import logger

    logger.set_level("WARNING")
    # httpx: the bench's serve suite talks to its own server, and PaddleNLP's root handler printed every request
    for name in ("paddle", "onnxruntime", "onnx_model", "onnx_model_bert", "fusion_base", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
