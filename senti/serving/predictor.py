"""`Predictor`: load an export folder and score texts. Needs numpy, tokenizers and a runtime; no paddlenlp."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from senti.core.artifacts import ExportMeta
from senti.core.batching import logits_in_order, new_tally
from senti.core.calibration import calibrated_probabilities, unsure_mask
from senti.core.errors import ArtifactError, SentiError
from senti.core.runtime import configure_runtime
from senti.core.sequence import text_budget
from senti.serving.tokenizer import FastTokenizer, head_chars, read_limit

LONG_TEXT_MODES = ("truncate", "window")
# With long_text="window", a text may take at most this many model inputs: one huge text must not hold
# the model (and every other caller) for seconds. 64 windows cover about 4,000 tokens at the default stride.
MAX_WINDOWS_PER_TEXT = 64


class InvalidText(SentiError):
    """Texts the tokenizer cannot take; `problems` maps each one's index to why."""

    def __init__(self, problems: dict[int, str]):
        self.problems = problems
        shown = "; ".join(f"text {i}: {why}" for i, why in list(problems.items())[:5])
        super().__init__(shown + (f"; and {len(problems) - 5} more" if len(problems) > 5 else ""))


def text_problem(text) -> str | None:
    """Why `text` cannot be scored (not a string, or not encodable Unicode such as a lone surrogate), or None."""
    if not isinstance(text, str):
        return f"expected a string, found {type(text).__name__}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"not valid Unicode (lone surrogate U+{ord(text[err.start]):04X} at character {err.start})"
    return None


@dataclass(frozen=True)
class CheckedText:
    """A text its server already checked (`text_problem`) for the predictor `by`, with its ids when counting its
    windows tokenized it: scored by that same predictor it is neither checked nor tokenized again. Scored by
    another (a reload came in between), it is read as its plain text."""

    text: str
    by: Any
    ids: list[int] | None = None


# One CPU model call's fixed cost in padded tokens' worth of work: on random 32-text mixes of ChnSentiCorp
# dev texts throughput was flat for 64-192 and best near 128 (python -m experiments.batch_cut; docs/guides/serving.md).
CPU_CALL_COST_TOKENS = 128


@dataclass
class Prediction:
    label: str
    score: float  # probability of `label`
    probabilities: dict[str, float]
    truncated: bool  # the text was longer than max_seq_len (cut, or scored in windows)
    windows: int = 1
    tokens: int = 0  # word pieces in the text (before cutting)
    unknown_tokens: int = 0  # of which [UNK]: characters outside the model's vocabulary (a drift signal)
    unsure: bool = False  # the score is below the export's abstention threshold (the label is still the likeliest)

    def to_json(self) -> dict:
        # by hand: dataclasses.asdict deep-copies, a measurable cost per text in a server's answers
        return {"label": self.label, "score": self.score, "probabilities": self.probabilities,
                "unsure": self.unsure, "truncated": self.truncated, "windows": self.windows, "tokens": self.tokens,
                "unknown_tokens": self.unknown_tokens}


def choose_backend(meta: ExportMeta, device: str) -> str:
    """`auto`: on CPU the INT8 model when export marked it fit, else the optimized graph; on GPU fp16 if fit."""
    from senti.serving.backends import auto_order

    formats = meta.formats
    for name in auto_order(device):
        if name in formats and formats[name].parity.fit:
            return name
    raise ArtifactError(f"no usable backend in the export (formats: {', '.join(formats)})")


@dataclass(frozen=True)
class LongTexts:
    """What a predictor does with a text longer than max_seq_len: `mode` "truncate", or "window" (windows `stride`
    tokens apart, at most `max_windows` a text)."""

    mode: str
    stride: int
    max_windows: int = MAX_WINDOWS_PER_TEXT


class Predictor:
    """Tokenize, batch by length, run the backend, and return one `Prediction` per text in input order."""

    def __init__(self, export_dir: Path, meta: ExportMeta, backend, backend_name: str, long_texts: LongTexts,
                 call_cost_tokens: int | None = None, *, tokenizer: FastTokenizer, version: str):
        self.export_dir = Path(export_dir)
        self.meta = meta
        self.labels: list[str] = meta.labels
        self.max_seq_len: int = meta.max_seq_len
        self.backend = backend
        self.backend_name = backend_name
        self.tokenizer = tokenizer
        self.long_text = long_texts.mode
        self.stride = long_texts.stride
        self.call_cost_tokens = call_cost_tokens
        self.max_windows = long_texts.max_windows
        self.version = version  # a hash of the bytes loaded: export.json, vocabulary, model
        # how logits become the probabilities answered, and below which probability an answer is unsure
        self.calibration = meta.calibration
        self.abstain = meta.abstain
        self.tally = new_tally()  # what the model has been given since loading (calls, rows, tokens, padding)

    @classmethod
    def load(cls, export_dir, backend: str = "auto", device: str = "cpu", threads: int | None = None,
             long_text: str = "truncate", stride: int | None = None, max_windows: int = MAX_WINDOWS_PER_TEXT,
             ort_spinning: bool = True, **backend_options) -> Predictor:
        """Open `export_dir` with the named backend (`auto`, `onnx`, `onnx-opt`, `onnx-int8`, `onnx-fp16`, `paddle`).

        `long_text="window"` scores texts longer than max_seq_len as overlapping windows (each
        `stride` tokens after the last; default half a window) and averages their logits; a text that
        would need more than `max_windows` windows is refused (`InvalidText`). `ort_spinning=False` keeps
        ONNX Runtime's threads from busy-waiting between calls (for servers sharing cores with other work).
        The folder is checked as `senti.serving.export_folder` says, the same at every door.
        """
        configure_runtime(threads)  # before the runtime (and paddle, if used) start their thread pools
        from senti.serving import export_folder
        from senti.serving.backends import BACKENDS, FORMATS, open_backend

        if long_text not in LONG_TEXT_MODES:
            raise SentiError(f"long_text must be one of {', '.join(LONG_TEXT_MODES)}; got '{long_text}'")
        meta, meta_raw = export_folder.read_meta(export_dir)
        vocab_text, vocab_raw = export_folder.read_vocab_text(export_dir, meta)
        try:
            tokenizer = FastTokenizer.from_settings(export_dir, meta.tokenizer, vocab_text)
        except (ValueError, TypeError, KeyError) as err:
            where = str(Path(export_dir) / meta.tokenizer.vocab_file)
            raise ArtifactError(str(err) if str(err).startswith(where) else f"{where}: {err}") from None
        name = choose_backend(meta, device) if backend == "auto" else backend
        if name not in FORMATS:
            raise ArtifactError(f"unknown backend '{name}'; choose one of {', '.join(BACKENDS)}")
        model, model_digest = export_folder.model_bytes(export_dir, FORMATS[name])
        if name != "paddle":
            backend_options.setdefault("allow_spinning", ort_spinning)
        try:
            runner = open_backend(Path(export_dir), name, threads=threads, device=device, model=model,
                                  **backend_options)
        except SentiError:
            raise
        except Exception as err:  # a truncated or foreign model file: the runtime's own words, on one line
            raise ArtifactError(f"{Path(export_dir) / FORMATS[name].path}: {name} cannot load it "
                                f"({type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]})") from None
        window = text_budget(meta.max_seq_len)
        stride = stride or max(1, window // 2)
        if not 1 <= stride <= window:
            raise SentiError(f"stride must be between 1 and {window}; got {stride}")
        if max_windows < 1:
            raise SentiError(f"max_windows must be at least 1; got {max_windows}")
        # On CPU a call costs little beyond its padded tokens, so mixed-length batches are cut (see
        # serving.batching); a GPU wants the big batch whatever its padding.
        call_cost = CPU_CALL_COST_TOKENS if device == "cpu" else None
        predictor = cls(export_dir, meta, runner, name, LongTexts(long_text, stride, max_windows), call_cost,
                        tokenizer=tokenizer, version=export_folder.version_of(meta_raw, vocab_raw, model_digest))
        export_folder.check_model(predictor)
        return predictor

    def _window_count(self, tokens: int) -> int:
        window = text_budget(self.max_seq_len)
        if self.long_text == "truncate" or tokens <= window:
            return 1
        return len(range(0, tokens - window, self.stride)) + 1

    def windows(self, texts: list[str]) -> list[int]:
        """Model inputs each text takes: 1 when cut, more when scored in windows (tokenizes in window mode)."""
        return self.checked(texts)[1]

    def checked(self, texts: list[str]) -> tuple[list[CheckedText], list[int]]:
        """The texts, which the caller found valid (`text_problem`), marked so that this predictor scores them
        without checking them again, and the model inputs each takes. In window mode counting them tokenizes
        them: the ids travel with them to scoring. In truncate mode each takes one input and is tokenized when
        scored, in the batch."""
        if self.long_text == "truncate":
            return [CheckedText(t, self) for t in texts], [1] * len(texts)
        ids = self._encode(texts)
        return [CheckedText(t, self, x) for t, x in zip(texts, ids)], [self._window_count(len(x)) for x in ids]

    def _encode(self, texts) -> list[list[int]]:
        """Ids of each text, read no further than the model can use: in truncate mode one window and a token
        more (to know it was cut); in window mode the most windows a text may take and a token more (to know it
        needs too many). A 1 MB text costs what a text of that length costs."""
        return self.tokenizer.encode_batch(list(texts), need=self._need())

    def window_problems(self, texts, counts: list[int]) -> dict[int, str]:
        """Why each text over `max_windows` cannot be scored, by index (`counts`: its windows, as `windows` says)."""
        whole = head_chars(self._need())  # texts up to this long were tokenized whole: their count is exact
        return {i: f"needs {n} windows; at most {self.max_windows} per text" if len(texts[i]) <= whole
                else f"needs more than {self.max_windows} windows, the most per text"
                for i, n in enumerate(counts) if n > self.max_windows}

    def _need(self) -> int:
        window = text_budget(self.max_seq_len)
        return window if self.long_text == "truncate" else window + self.stride * (self.max_windows - 1)

    def _pieces(self, ids: list[int]) -> list[list[int]]:
        window = text_budget(self.max_seq_len)
        if self.long_text == "truncate" or len(ids) <= window:
            return [self.tokenizer.with_specials(ids, self.max_seq_len)[0]]
        starts = list(range(0, len(ids) - window, self.stride)) + [len(ids) - window]
        return [[self.tokenizer.cls_id, *ids[s : s + window], self.tokenizer.sep_id] for s in starts]

    def _checked_and_encoded(self, texts) -> tuple[list[str], list[list[int]]]:
        """(the plain texts, their ids): texts this predictor checked come with what it knew of them; any other
        text is checked here, before any work, so the caller can drop just the bad ones and retry."""
        mine = [t.by is self if isinstance(t, CheckedText) else False for t in texts]
        plain = [t.text if isinstance(t, CheckedText) else t for t in texts]
        problems = {i: why for i, (text, checked) in enumerate(zip(plain, mine)) if not checked
                    and (why := text_problem(text))}
        if problems:
            raise InvalidText(problems)
        known = [t.ids if checked else None for t, checked in zip(texts, mine)]
        missing = [i for i, ids in enumerate(known) if ids is None]
        for i, ids in zip(missing, self._encode([plain[i] for i in missing]) if missing else []):
            known[i] = ids
        return plain, known  # type: ignore[return-value]  # every None was filled

    def logits(self, texts: list[str], batch_size: int = 32) -> tuple[np.ndarray, list[int], list[bool]]:
        """Raw logits per text (window-averaged), the window counts, and which texts were too long."""
        return self._score(texts, batch_size)[:3]

    def _score(self, texts: Sequence[str | CheckedText], batch_size: int):
        """(logits, windows, too long, tokens, [UNK] tokens) per text."""
        if isinstance(texts, str):
            raise TypeError("predict() takes a list of texts, not one string")
        if batch_size < 1:
            raise SentiError(f"batch_size must be at least 1; got {batch_size}")
        texts, ids = self._checked_and_encoded(texts)
        over = self.window_problems(texts, [self._window_count(len(x)) for x in ids])
        if over:
            raise InvalidText(over)
        # cut by tokens, or by characters read (a text of mostly spaces: serving.tokenizer.read_limit)
        too_long = [len(x) > text_budget(self.max_seq_len) or len(t) > read_limit(self._need())
                    for x, t in zip(ids, texts)]
        pieces, owner = [], []
        for i, text_ids in enumerate(ids):
            for piece in self._pieces(text_ids):
                pieces.append(piece)
                owner.append(i)
        piece_logits = logits_in_order(self.backend, pieces, batch_size, self.tokenizer.pad_id, self.call_cost_tokens,
                                       self.tally)
        owners = np.asarray(owner, dtype=np.int64)
        counts = np.bincount(owners, minlength=len(ids))
        sums = np.zeros((len(ids), len(self.labels)), dtype=np.float64)
        np.add.at(sums, owners, piece_logits)
        tokens = [len(x) for x in ids]
        unknown = [sum(1 for t in x if t == self.tokenizer.unk_id) for x in ids]
        return (sums / np.maximum(counts, 1)[:, None]).astype(np.float32), counts.tolist(), too_long, tokens, unknown

    def aspects(self, texts: list[str], aspects, unit: str = "sentence", neutral_margin: float = 0.0) -> list[dict]:
        """For each text, {aspect name: AspectAnswer} over `aspects` (senti.core.aspects.Aspect, or read by
        `read_aspects`): positive, neutral, negative or not_mentioned, with the evidence (senti.serving.aspects).
        A two-class positive/negative model (the list may change with every call), or one with aspect heads (any of
        the aspects it has heads for)."""
        from senti.serving.aspects import answer_aspects

        return answer_aspects(self, texts, aspects, unit, neutral_margin)

    def predict(self, texts: Sequence[str | CheckedText], batch_size: int = 32) -> list[Prediction]:
        """One Prediction per text, in input order."""
        if len(texts) == 0:
            return []
        logits, windows, too_long, tokens, unknown = self._score(texts, batch_size)
        probs = self.probabilities(logits)
        unsure = unsure_mask(probs, self.abstain)
        out = []
        for row, n, cut, length, unk, doubt in zip(probs, windows, too_long, tokens, unknown, unsure):
            best = int(row.argmax())
            out.append(Prediction(label=self.labels[best], score=float(row[best]),
                                  probabilities={lab: float(p) for lab, p in zip(self.labels, row)},
                                  truncated=bool(cut), windows=int(n), tokens=int(length), unknown_tokens=int(unk),
                                  unsure=bool(doubt)))
        return out

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """What the model answers for these logits: softmax(logits / temperature + bias) as export.json's
        calibration has it (the plain softmax for an export without one)."""
        return calibrated_probabilities(logits, self.calibration)
