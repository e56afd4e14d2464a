"""The two rules of a model's sequence length, written once: its range, and the tokens left for text."""

from __future__ import annotations

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
