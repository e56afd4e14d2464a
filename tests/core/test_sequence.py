"""senti.core.sequence: the range of a model's sequence length, the tokens left for text, the length a step uses,
and character windows for texts too long to handle at once."""

from __future__ import annotations

from senti.core.sequence import (
    MAX_SEQ_LEN,
    MIN_SEQ_LEN,
    length_to_use,
    seq_len_problem,
    text_budget,
    text_windows,
)


def test_the_length_range_and_the_text_budget():
    assert text_budget(128) == 126
    assert seq_len_problem(128) is None and seq_len_problem(MIN_SEQ_LEN) is None and seq_len_problem(MAX_SEQ_LEN) is None
    for bad in (MIN_SEQ_LEN - 1, MAX_SEQ_LEN + 1, "128", 128.0, None):
        assert "max_seq_len must be between" in (seq_len_problem(bad) or ""), bad


def test_the_length_asked_for_wins_else_the_trained_one():
    assert length_to_use(None, 256) == 256 and length_to_use(64, 256) == 64


def test_windows_cover_the_text_and_cut_after_a_space_near_the_end():
    text = ("word " * 3000).strip()
    pieces = list(text_windows(text, size=1000))
    assert "".join(pieces) == text and all(len(p) <= 1000 for p in pieces)
    assert all(p.endswith(" ") for p in pieces[:-1])  # never inside a word
    spaceless = "字" * 2500
    assert [len(p) for p in text_windows(spaceless, size=1000)] == [1000, 1000, 500]
    assert list(text_windows("short", size=1000)) == ["short"]
