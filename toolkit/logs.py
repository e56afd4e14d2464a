"""Quiet the libraries' start-up chatter so the user sees senti's own messages."""

from __future__ import annotations

import logging
import warnings


def quiet_libraries() -> None:
    """Hide PaddleNLP's INFO logs and import-time deprecation warnings; errors still show."""
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from paddlenlp.utils.log import logger

    logger.set_level("WARNING")
    for name in ("paddle", "onnxruntime", "onnx_model", "onnx_model_bert", "fusion_base"):
        logging.getLogger(name).setLevel(logging.WARNING)
