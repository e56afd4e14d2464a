"""The rules of a model's sequence length, written once: its range, the tokens left for text, and how a text too long
to handle at once is cut into character windows."""

from __future__ import annotations

from collections.abc import Iterator

MIN_SEQ_LEN, MAX_SEQ_LEN = 8, 2048
SPECIAL_TOKENS_PER_TEXT = 2  # [CLS] text [SEP]


def text_budget(max_seq_len: int) -> int:
    """Tokens of text that fit in `max_seq_len` beside [CLS] and [SEP]."""
    return max_seq_len - SPECIAL_TOKENS_PER_TEXT


def seq_len_problem(max_seq_len) -> str | None:
    """Why `max_seq_len` cannot be used, or None."""
    if not isinstance(max_seq_len, int) or not MIN_SEQ_LEN <= max_seq_len <= MAX_SEQ_LEN:
        return f"max_seq_len must be between {MIN_SEQ_LEN} and {MAX_SEQ_LEN}; got {max_seq_len!r}"
    return None


# A text longer than this is handled in windows of this many characters where the whole text is not needed at once
# (a pretraining corpus's tokens, a vocabulary's characters): one 51 MB line took 12 GB read whole.
WINDOW_CHARS = 4096


def text_windows(text: str, size: int = WINDOW_CHARS) -> Iterator[str]:
    """`text` in pieces of at most `size` characters, cut after a space where one is near the end of a piece."""
    start = 0
    while len(text) - start > size:
        cut = text.rfind(" ", start + size * 3 // 4, start + size)
        end = cut + 1 if cut > start else start + size
        yield text[start:end]
        start = end
    yield text[start:]


def length_to_use(asked: int | None, trained_at: int) -> int:
    """The one rule for a step's sequence length: the one asked for (--max-seq-len), else the length the model was
    trained at (a checkpoint's or teacher's senti.json; a new model's default). Train, distill and export use it."""
    return asked if asked is not None else trained_at
