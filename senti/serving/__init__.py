"""The runtime that production services embed: load an export folder, score texts.

Imports neither `paddlenlp` nor `toolkit`; needs numpy, `tokenizers` and onnxruntime (or paddle
for the Paddle Inference backend).
"""

from senti.core.errors import ArtifactError, SentiError
from senti.serving.predictor import Prediction, Predictor

__all__ = ["ArtifactError", "Prediction", "Predictor", "SentiError"]
