"""A model's own `tokenizer.json` (Hugging Face `tokenizers`: Unigram for XLM-R and e5, BPE, WordPiece) as the
tokenizer of a senti checkpoint, from training to the export.

PaddleNLP's ErnieTokenizer reads a WordPiece `vocab.txt` only; a SentencePiece/Unigram model (XLM-R, e5) needs its
own definition. `JsonTokenizer` gives training, the checkpoint reader and the export the calls they make of
PaddleNLP's tokenizers (`tokenize`, `convert_tokens_to_ids`, `__call__`, `save_pretrained`, the special tokens), over
the one `tokenizer.json` that the start folder brought: the same file is saved beside the weights, read by
`senti.serving.tokenizer.FastTokenizer`, and written into the export for Node, the browser and Triton. A checkpoint
says which it has in `tokenizer_config.json` (`tokenizer_class: JsonTokenizer`) and in senti.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from senti.core import layout
from senti.core.errors import ArtifactError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

JSON_TOKENIZER_CLASS = "JsonTokenizer"
MAX_TOKENIZER_JSON_BYTES = 64 << 20  # XLM-R's full tokenizer.json is 17 MB
TOKENIZER_MODELS = ("Unigram", "WordPiece", "BPE")
SPECIAL_NAMES = ("cls_token", "sep_token", "pad_token", "unk_token", "mask_token")
# XLM-R's names, the defaults of a Unigram definition whose folder does not say them.
XLMR_SPECIALS = {"cls_token": "<s>", "sep_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
                 "mask_token": "<mask>"}


def load_definition(text: str, where) -> Tokenizer:
    """A `tokenizers.Tokenizer` from tokenizer.json text, without truncation or padding (senti cuts and pads
    itself); one line naming `where` for what is not a definition of a model senti reads."""
    from tokenizers import Tokenizer

    try:
        data = json.loads(text)
        kind = data["model"]["type"] if isinstance(data, dict) and isinstance(data.get("model"), dict) else None
    except (ValueError, RecursionError):
        kind = None
    if kind not in TOKENIZER_MODELS:
        raise ArtifactError(f"{where}: not a tokenizer.json of a {', '.join(TOKENIZER_MODELS)} model")
    for part in ("normalizer", "pre_tokenizer"):  # what runs on every text a request sends
        for pattern in regexes(data.get(part)):
            problem = regex_problem(pattern)
            if problem:
                raise ArtifactError(f"{where}: the {part} regex {pattern[:60]!r} {problem}; senti reads tokenizer "
                                    "regexes without nested repetition (BERT, RoBERTa and XLM-R folders have none)")
    try:
        tokenizer = Tokenizer.from_str(text)
    except Exception as err:  # tokenizers raises its own exception type for malformed definitions
        raise ArtifactError(f"{where}: unreadable tokenizer.json ({str(err).splitlines()[0][:120]})") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


MAX_REGEX = 1000  # characters of one tokenizer regex


def regexes(node) -> list[str]:
    """Every regex pattern (`{"Regex": ...}`) inside a tokenizer.json part."""
    if isinstance(node, dict):
        found = [node["Regex"]] if isinstance(node.get("Regex"), str) else []
        return found + [p for key, value in node.items() if key != "Regex" for p in regexes(value)]
    if isinstance(node, list):
        return [p for value in node for p in regexes(value)]
    return []


def regex_problem(pattern: str) -> str | None:
    """Why a tokenizer regex could take time exponential in the text (a repeated group that itself repeats or
    alternates, as `(a+)+$`: Oniguruma then hits its retry limit and `tokenizers` panics), or None."""
    if len(pattern) > MAX_REGEX:
        return f"is {len(pattern)} characters long (at most {MAX_REGEX})"
    groups = [False]  # per open group: whether it holds a repetition or an alternation
    closed = False  # the token just read is a group that holds one
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            skip = pattern.index("}", i) + 1 if pattern[i + 1:i + 3] in ("p{", "P{") and "}" in pattern[i:] else i + 2
            i, closed = skip, False
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class, closed = True, False
            if pattern[i + 1:i + 2] == "^":
                i += 1
            if pattern[i + 1:i + 2] == "]":
                i += 1  # a ] first in a class is a character
        elif c == "(":
            groups.append(False)
            closed = False
        elif c == ")":
            closed = groups.pop() if len(groups) > 1 else False
            groups[-1] = groups[-1] or closed
        elif c in "*+" or (c == "{" and pattern[i + 1:i + 2].isdigit()):
            if closed:
                return "repeats a group that repeats or alternates"
            groups[-1], closed = True, False
        elif c == "|":
            groups[-1], closed = True, False
        elif c != "?":
            closed = False
        i += 1
    return None


def read_definition(folder: Path, kind: str = "model folder") -> str:
    """tokenizer.json's text, read as untrusted input (inside the folder, bounded, UTF-8)."""
    from senti.core.untrusted import inside, read_bounded

    path = inside(Path(folder), layout.TOKENIZER_JSON, "the tokenizer", kind)
    raw = read_bounded(path, MAX_TOKENIZER_JSON_BYTES, "the tokenizer", "a tokenizers library")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ArtifactError(f"{path}: not UTF-8 text (byte {err.start})") from None


def is_json_tokenizer_folder(folder: Path) -> bool:
    """Whether a folder's tokenizer is its own tokenizer.json (`tokenizer_config.json` says JsonTokenizer)."""
    from senti.core.untrusted import read_json_file

    if not (Path(folder) / layout.PADDLENLP_TOKENIZER_CONFIG).is_file():
        return False
    settings = read_json_file(Path(folder), layout.PADDLENLP_TOKENIZER_CONFIG, "the tokenizer config", "model folder")
    return isinstance(settings, dict) and settings.get("tokenizer_class") == JSON_TOKENIZER_CLASS


class JsonTokenizer:
    """PaddleNLP's tokenizer calls over a tokenizer.json; ids are [CLS] text [SEP] in the definition's own specials."""

    senti_vocab_file = layout.TOKENIZER_JSON  # what TokenizerSettings records as the vocabulary file
    do_lower_case = False  # the definition's normalizer decides

    def __init__(self, definition: str, where: object = layout.TOKENIZER_JSON, **specials: str):
        self.definition = definition
        self._tokenizer = load_definition(definition, where)
        self._vocab: dict[str, int] = self._tokenizer.get_vocab(with_added_tokens=True)
        names = {**XLMR_SPECIALS, **{k: v for k, v in specials.items() if k in SPECIAL_NAMES and v}}
        for name, token in names.items():
            if token not in self._vocab and name != "mask_token":
                raise ArtifactError(f"{where}: the {name.replace('_', ' ')} {token!r} is not in the vocabulary")
        self.cls_token, self.sep_token, self.pad_token = names["cls_token"], names["sep_token"], names["pad_token"]
        self.unk_token, self.mask_token = names["unk_token"], names["mask_token"]
        self.cls_token_id, self.sep_token_id = self._vocab[self.cls_token], self._vocab[self.sep_token]
        self.pad_token_id, self.unk_token_id = self._vocab[self.pad_token], self._vocab[self.unk_token]
        self.mask_token_id = self._vocab.get(self.mask_token)

    @classmethod
    def from_folder(cls, folder: Path, kind: str = "model folder") -> JsonTokenizer:
        from senti.core.untrusted import read_json_file

        settings = {}
        if (Path(folder) / layout.PADDLENLP_TOKENIZER_CONFIG).is_file():
            data = read_json_file(Path(folder), layout.PADDLENLP_TOKENIZER_CONFIG, "the tokenizer config", kind)
            settings = {k: v for k, v in (data if isinstance(data, dict) else {}).items()
                        if k in SPECIAL_NAMES and isinstance(v, str)}
        return cls(read_definition(folder, kind), Path(folder) / layout.TOKENIZER_JSON, **settings)

    @property
    def vocab(self) -> dict[str, int]:
        return self._vocab

    def __len__(self) -> int:
        return len(self._vocab)

    def tokenize(self, text: str) -> list[str]:
        return self._tokenizer.encode(text, add_special_tokens=False).tokens

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._vocab.get(tokens, self.unk_token_id)
        return [self._vocab.get(t, self.unk_token_id) for t in tokens]

    def __call__(self, texts, max_length: int = 512, truncation: bool = True) -> dict:
        """{"input_ids": [[CLS] ids [SEP] per text]}, cut to `max_length` as PaddleNLP's tokenizers cut."""
        single = isinstance(texts, str)
        rows = []
        for e in self._tokenizer.encode_batch([texts] if single else list(texts), add_special_tokens=False):
            ids = e.ids[: max_length - 2] if truncation else e.ids
            rows.append([self.cls_token_id, *ids, self.sep_token_id])
        return {"input_ids": rows[0] if single else rows}

    def save_pretrained(self, folder: str) -> None:
        """tokenizer.json (the definition as it came) and tokenizer_config.json (the class and the specials)."""
        (Path(folder) / layout.TOKENIZER_JSON).write_text(self.definition, encoding="utf-8")
        config = {"tokenizer_class": JSON_TOKENIZER_CLASS, **{n: getattr(self, n) for n in SPECIAL_NAMES}}
        (Path(folder) / layout.PADDLENLP_TOKENIZER_CONFIG).write_text(json.dumps(config, ensure_ascii=False, indent=2)
                                                                        + "\n", encoding="utf-8")


def tokenizer_text(folder: Path) -> str:
    """The text that defines a folder's ids: its tokenizer.json for a JsonTokenizer folder, else its vocab.txt (two
    folders with the same text give the same ids)."""
    if is_json_tokenizer_folder(folder):
        return read_definition(folder)
    return (Path(folder) / layout.VOCAB).read_text(encoding="utf-8")


def folder_tokenizer(folder: Path, lower: bool = True, kind: str = "model folder"):
    """The tokenizer a PaddleNLP or senti folder was trained with: its tokenizer.json (JsonTokenizer) when
    tokenizer_config.json says so, else PaddleNLP's ErnieTokenizer over its vocab.txt."""
    if is_json_tokenizer_folder(folder):
        return JsonTokenizer.from_folder(folder, kind)
    if not (Path(folder) / layout.VOCAB).is_file():
        raise ArtifactError(f"{folder}: no {layout.VOCAB} (or {layout.TOKENIZER_JSON} named by "
                            f"{layout.PADDLENLP_TOKENIZER_CONFIG}) beside the weights")
    from paddlenlp.transformers import ErnieTokenizer

    return ErnieTokenizer(str(Path(folder) / layout.VOCAB), do_lower_case=lower)
