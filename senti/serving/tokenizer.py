"""Fast tokenization with Hugging Face `tokenizers`, giving exactly the ids of PaddleNLP's ErnieTokenizer.

ErnieTokenizer is BERT's recipe: clean control characters, split CJK characters apart,
lower-case and strip accents, split on whitespace and punctuation, then greedy WordPiece with
`##` continuations and [UNK] for words over 100 characters. `BertNormalizer`, `BertPreTokenizer`
and `WordPiece` implement the same steps in Rust. Two PaddleNLP differences make the rest:
it also splits off every Unicode symbol (category S: ￥, ～, ×, emoji) and a few listed code
points (`_is_symbol` in paddlenlp.transformers.tokenizer_utils), and it keeps special tokens
written in the text ("[UNK]") whole.
"""

from __future__ import annotations

from pathlib import Path

from senti.core.artifacts import TokenizerSettings
from senti.core.errors import SentiError
from senti.core.sequence import text_budget

# A head of this many characters per token needed (plus slack) is read first; each token takes at least one.
HEAD_CHARS_PER_TOKEN, HEAD_SLACK_CHARS = 4, 64


class TokenizerFailure(SentiError):
    """The tokenizer itself failed on a text (a panic in `tokenizers`): that call's error, never the server's."""


def head_chars(need: int) -> int:
    """The characters first read of a text of which `need` tokens are wanted; shorter texts are read whole."""
    return HEAD_CHARS_PER_TOKEN * need + HEAD_SLACK_CHARS


# A text is never read past this many characters per token wanted: whitespace, control characters and other text
# that makes no token cannot make a text cost more than that, whatever its bytes (a megabyte of spaces before one
# word was tokenized whole). Real text takes 1 to 5 characters a token; a text cut here counts as truncated.
MAX_CHARS_PER_TOKEN = 64


def read_limit(need: int) -> int:
    """The most characters of a text read when `need` tokens are wanted."""
    return MAX_CHARS_PER_TOKEN * need + HEAD_SLACK_CHARS


# paddlenlp's _is_symbol: any Unicode symbol, plus these code points.
PADDLE_SYMBOLS = r"[\p{S}\x{00AD}\x{00B2}\x{00BA}\x{3007}\x{00B5}\x{00D8}\x{014B}\x{01B1}]"


def read_vocab(path: Path) -> dict[str, int]:
    return vocab_from_text(Path(path).read_text(encoding="utf-8"))


def vocab_from_text(text: str) -> dict[str, int]:
    # One token per line, its id the line number; ErnieTokenizer strips only the line ending.
    vocab = {}
    for i, line in enumerate(text.split("\n")):
        token = line.rstrip("\r")
        if token and token not in vocab:
            vocab[token] = i
    return vocab


class FastTokenizer:
    """Text to ERNIE input ids; `encode` returns untruncated ids without [CLS]/[SEP]."""

    def __init__(self, vocab_file: Path | None, do_lower_case: bool = True, unk_token: str = "[UNK]",
                 cls_token: str = "[CLS]", sep_token: str = "[SEP]", pad_token: str = "[PAD]",
                 vocab: dict[str, int] | None = None):
        from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

        if vocab is None:
            if vocab_file is None:
                raise ValueError("FastTokenizer needs a vocab_file or a vocab")
            vocab = read_vocab(vocab_file)
        for token in (unk_token, cls_token, sep_token, pad_token):
            if token not in vocab:
                raise ValueError(f"{vocab_file or 'the vocabulary'}: special token {token} is missing")
        self._tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=unk_token, max_input_chars_per_word=100))
        self._tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=do_lower_case
        )
        self._tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.BertPreTokenizer(),
            pre_tokenizers.Split(Regex(PADDLE_SYMBOLS), behavior="isolated"),
        ])
        self._tokenizer.add_special_tokens([t for t in vocab if t.startswith("[") and t.endswith("]") and
                                            t in (unk_token, cls_token, sep_token, pad_token, "[MASK]")])
        self.cls_id, self.sep_id, self.pad_id = vocab[cls_token], vocab[sep_token], vocab[pad_token]
        self.unk_id = vocab[unk_token]
        self.vocab_size = len(vocab)
        self.cls_token, self.sep_token = cls_token, sep_token

    @classmethod
    def from_definition(cls, definition: str, settings: TokenizerSettings, where) -> FastTokenizer:
        """The tokenizer of a model that brought its own tokenizer.json (core.json_tokenizer: Unigram, BPE), with
        the special tokens its settings name; the same calls as a WordPiece one."""
        from senti.core.json_tokenizer import load_definition

        self = cls.__new__(cls)
        self._tokenizer = load_definition(definition, where)
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        for token in (settings.cls_token, settings.sep_token, settings.pad_token, settings.unk_token):
            if token not in vocab:
                raise ValueError(f"{where}: special token {token} is missing")
        self.cls_id, self.sep_id, self.pad_id = vocab[settings.cls_token], vocab[settings.sep_token], \
            vocab[settings.pad_token]
        self.unk_id, self.vocab_size = vocab[settings.unk_token], len(vocab)
        self.cls_token, self.sep_token = settings.cls_token, settings.sep_token
        return self

    @classmethod
    def from_settings(cls, folder: Path, settings: TokenizerSettings, vocab_text: str | None = None) -> FastTokenizer:
        """The tokenizer of an export or checkpoint folder; `vocab_text`: the vocabulary (or tokenizer.json) as
        already read (and checked) by the caller."""
        from senti.core.json_tokenizer import JSON_TOKENIZER_CLASS, read_definition

        if settings.tokenizer_class == JSON_TOKENIZER_CLASS:
            text = read_definition(Path(folder)) if vocab_text is None else vocab_text
            return cls.from_definition(text, settings, Path(folder) / settings.vocab_file)
        return cls(Path(folder) / settings.vocab_file, do_lower_case=settings.do_lower_case,
                   unk_token=settings.unk_token, cls_token=settings.cls_token, sep_token=settings.sep_token,
                   pad_token=settings.pad_token, vocab=None if vocab_text is None else vocab_from_text(vocab_text))

    def save_standalone(self, path: Path, max_seq_len: int) -> None:
        """A `tokenizer.json` that gives the model's full input ids on its own ([CLS] text [SEP], cut to
        `max_seq_len`), for `tokenizers.Tokenizer.from_file` clients in Rust, Node or Triton's Python backend."""
        from tokenizers import Tokenizer, processors

        standalone = Tokenizer.from_str(self._tokenizer.to_str())
        cls_token, sep_token = self.cls_token, self.sep_token
        standalone.post_processor = processors.TemplateProcessing(
            single=f"{cls_token} $A {sep_token}", pair=f"{cls_token} $A {sep_token} $B:1 {sep_token}:1",
            special_tokens=[(cls_token, self.cls_id), (sep_token, self.sep_id)])
        standalone.enable_truncation(max_length=max_seq_len)
        standalone.save(str(path))

    def encode_batch(self, texts: list[str], need: int | None = None) -> list[list[int]]:
        """Word-piece ids of each text, no special tokens (Rust, parallel). With `need`, a text longer than that
        many tokens may come back cut after `need` + 1 or more exact tokens: only its head is read, and never more
        than `read_limit(need)` characters, so the cost of a huge text is bounded by what the model can take, not
        by its size or by how much of it makes no token. A panic inside `tokenizers` (a BaseException: pyo3's
        PanicException) comes back as TokenizerFailure, an ordinary error of this call."""
        try:
            return self._encode_batch(texts, need)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # pyo3_runtime.PanicException derives from BaseException
            if isinstance(err, Exception):
                raise
            raise TokenizerFailure(f"the tokenizer failed on these texts ({type(err).__name__}: "
                                   f"{str(err).splitlines()[0][:120] if str(err) else 'no message'})") from None

    def _encode_batch(self, texts: list[str], need: int | None) -> list[list[int]]:
        if need is None:
            return [e.ids for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]
        first = head_chars(need)
        short = [i for i, t in enumerate(texts) if len(t) <= first]
        out: list[list[int]] = [[] for _ in texts]
        for i, e in zip(short, self._tokenizer.encode_batch([texts[i] for i in short], add_special_tokens=False)):
            out[i] = e.ids
        for i in set(range(len(texts))) - set(short):
            out[i] = self._head_ids(texts[i][: read_limit(need)], need, first)
        return out

    def _head_ids(self, text: str, need: int, limit: int) -> list[int]:
        """More than `need` exact leading ids of a long text, tokenizing as short a head of it as will do."""
        while limit < len(text):
            enc = self._tokenizer.encode(text[:limit], add_special_tokens=False)
            # The cut may fall inside the head's last word (whose word pieces then differ) or inside a special
            # token written in the text ("[MASK]"): ids before both are the ids of the whole text.
            last_word = enc.word_ids[-1] if enc.ids else None
            cut_at = limit - HEAD_SLACK_CHARS
            if last_word is not None:
                cut_at = min(cut_at, next(s for (s, _), w in zip(enc.offsets, enc.word_ids) if w == last_word))
            exact = [token for token, (_, end) in zip(enc.ids, enc.offsets) if end <= cut_at]
            if len(exact) > need:
                return exact
            limit *= 4  # mostly spaces or one long word: read more
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """(ids, character offsets into the text) of each text, no special tokens (for whole-word masking)."""
        return [(e.ids, e.offsets) for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def with_specials(self, ids: list[int], max_seq_len: int) -> tuple[list[int], bool]:
        """[CLS] ids [SEP], cut to `max_seq_len` as ErnieTokenizer's truncation does; and whether it cut."""
        budget = text_budget(max_seq_len)
        return [self.cls_id, *ids[:budget], self.sep_id], len(ids) > budget

    def __call__(self, texts: list[str], max_seq_len: int) -> list[list[int]]:
        """[CLS] ids [SEP] of each text cut to `max_seq_len`, reading only as much of a long text as that takes."""
        return [self.with_specials(ids, max_seq_len)[0]
                for ids in self.encode_batch(texts, need=text_budget(max_seq_len))]
