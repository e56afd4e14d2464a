"""`senti train`'s settings: one dataclass that checks itself and round-trips through JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from toolkit.errors import SentiError

DEVICES = ("auto", "cpu", "gpu", "xpu", "npu")
AMP_DTYPES = ("float16", "bfloat16")


@dataclass
class TrainConfig:
    model: str
    dataset: str
    output_dir: str
    epochs: int = 3
    batch_size: int = 32
    max_seq_len: int = 128
    lr: float = 5e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    amp: bool = False
    amp_dtype: str = "float16"
    init_loss_scaling: float = 1024.0
    device: str = "auto"
    seed: int = 42
    max_steps: int | None = None
    eval_every: int | None = None  # steps; None evaluates once per epoch
    early_stop: int | None = None  # evaluations without improvement before stopping
    text_column: str | None = None
    label_column: str | None = None
    threads: int | None = None

    def __post_init__(self):
        checks = [
            (self.epochs >= 1, "epochs must be at least 1"),
            (self.batch_size >= 1, "batch_size must be at least 1"),
            (8 <= self.max_seq_len <= 2048, "max_seq_len must be between 8 and 2048"),
            (self.lr > 0, "lr must be positive"),
            (0 <= self.warmup < 1, "warmup is a fraction of the steps, in [0, 1)"),
            (self.max_grad_norm > 0, "max_grad_norm must be positive"),
            (self.device in DEVICES, f"device must be one of {', '.join(DEVICES)}"),
            (self.amp_dtype in AMP_DTYPES, f"amp_dtype must be one of {', '.join(AMP_DTYPES)}"),
            (self.max_steps is None or self.max_steps >= 1, "max_steps must be at least 1"),
            (self.eval_every is None or self.eval_every >= 1, "eval_every must be at least 1"),
            (self.early_stop is None or self.early_stop >= 1, "early_stop must be at least 1"),
            (self.threads is None or self.threads >= 1, "threads must be at least 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise SentiError(f"invalid training setting: {message}")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise SentiError(f"unknown training settings: {', '.join(sorted(unknown))}")
        return cls(**data)

    @classmethod
    def load(cls, path: Path) -> TrainConfig:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
