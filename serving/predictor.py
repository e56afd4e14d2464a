"""`Predictor`: load an export folder and score texts. Needs numpy, tokenizers and a runtime; no paddlenlp."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from senti.serving.artifacts import ExportMeta, read_export_meta
from senti.serving.batching import logits_in_order
from senti.serving.errors import ArtifactError, SentiError
from senti.serving.runtime import configure_runtime
from senti.serving.tokenizer import FastTokenizer

LONG_TEXT_MODES = ("truncate", "window")
# One CPU model call's fixed cost in padded tokens' worth of work: on random 32-text mixes of ChnSentiCorp
# dev texts throughput was flat for 64-192 and best near 128 (python -m benchmarks.batch_cut; README).
CPU_CALL_COST_TOKENS = 128


@dataclass
class Prediction:
    label: str
    score: float  # probability of `label`
    probabilities: dict[str, float]
    truncated: bool  # the text was longer than max_seq_len (cut, or scored in windows)
    windows: int = 1

    def to_json(self) -> dict:
        return asdict(self)


def choose_backend(meta: ExportMeta, device: str) -> str:
    """`auto`: on CPU the INT8 model when export marked it fit, else the optimized graph; on GPU fp16 if fit."""
    from senti.serving.backends import auto_order

    formats = meta.formats
    for name in auto_order(device):
        if name in formats and formats[name]["parity"].get("fit"):
            return name
    raise ArtifactError(f"no usable backend in the export (formats: {', '.join(formats)})")


class Predictor:
    """Tokenize, batch by length, run the backend, and return one `Prediction` per text in input order."""

    def __init__(self, export_dir: Path, meta: ExportMeta, backend, backend_name: str, long_text: str, stride: int,
                 call_cost_tokens: int | None = None):
        self.export_dir = Path(export_dir)
        self.meta = meta
        self.labels: list[str] = meta.labels
        self.max_seq_len: int = meta.max_seq_len
        self.backend = backend
        self.backend_name = backend_name
        self.tokenizer = FastTokenizer.from_export(export_dir, meta.tokenizer)
        self.long_text = long_text
        self.stride = stride
        self.call_cost_tokens = call_cost_tokens

    @classmethod
    def load(cls, export_dir, backend: str = "auto", device: str = "cpu", threads: int | None = None,
             long_text: str = "truncate", stride: int | None = None, **backend_options) -> Predictor:
        """Open `export_dir` with the named backend (`auto`, `onnx`, `onnx-opt`, `onnx-int8`, `onnx-fp16`, `paddle`).

        `long_text="window"` scores texts longer than max_seq_len as overlapping windows (each
        `stride` tokens after the last; default half a window) and averages their logits.
        """
        configure_runtime(threads)  # before the runtime (and paddle, if used) start their thread pools
        from senti.serving.backends import open_backend

        if long_text not in LONG_TEXT_MODES:
            raise SentiError(f"long_text must be one of {', '.join(LONG_TEXT_MODES)}; got '{long_text}'")
        meta = read_export_meta(export_dir)
        name = choose_backend(meta, device) if backend == "auto" else backend
        runner = open_backend(Path(export_dir), name, threads=threads, device=device, **backend_options)
        window = meta.max_seq_len - 2
        stride = stride or max(1, window // 2)
        if not 1 <= stride <= window:
            raise SentiError(f"stride must be between 1 and {window}; got {stride}")
        # On CPU a call costs little beyond its padded tokens, so mixed-length batches are cut (see
        # serving.batching); a GPU wants the big batch whatever its padding.
        call_cost = CPU_CALL_COST_TOKENS if device == "cpu" else None
        return cls(export_dir, meta, runner, name, long_text, stride, call_cost)

    def _pieces(self, ids: list[int]) -> list[list[int]]:
        window = self.max_seq_len - 2
        if self.long_text == "truncate" or len(ids) <= window:
            return [self.tokenizer.with_specials(ids, self.max_seq_len)[0]]
        starts = list(range(0, len(ids) - window, self.stride)) + [len(ids) - window]
        return [[self.tokenizer.cls_id, *ids[s : s + window], self.tokenizer.sep_id] for s in starts]

    def logits(self, texts: list[str], batch_size: int = 32) -> tuple[np.ndarray, list[int], list[bool]]:
        """Raw logits per text (window-averaged), the window counts, and which texts were too long."""
        if isinstance(texts, str):
            raise TypeError("predict() takes a list of texts, not one string")
        ids = self.tokenizer.encode_batch(list(texts))
        too_long = [len(x) > self.max_seq_len - 2 for x in ids]
        pieces, owner = [], []
        for i, text_ids in enumerate(ids):
            for piece in self._pieces(text_ids):
                pieces.append(piece)
                owner.append(i)
        piece_logits = logits_in_order(self.backend, pieces, batch_size, self.tokenizer.pad_id, self.call_cost_tokens)
        owner = np.asarray(owner, dtype=np.int64)
        counts = np.bincount(owner, minlength=len(ids))
        sums = np.zeros((len(ids), len(self.labels)), dtype=np.float64)
        np.add.at(sums, owner, piece_logits)
        return (sums / np.maximum(counts, 1)[:, None]).astype(np.float32), counts.tolist(), too_long

    def predict(self, texts: list[str], batch_size: int = 32) -> list[Prediction]:
        """One Prediction per text, in input order."""
        if len(texts) == 0:
            return []
        logits, windows, too_long = self.logits(texts, batch_size)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = shifted / shifted.sum(axis=1, keepdims=True)
        out = []
        for row, n, cut in zip(probs, windows, too_long):
            best = int(row.argmax())
            out.append(Prediction(label=self.labels[best], score=float(row[best]),
                                  probabilities={lab: float(p) for lab, p in zip(self.labels, row)},
                                  truncated=bool(cut), windows=int(n)))
        return out
