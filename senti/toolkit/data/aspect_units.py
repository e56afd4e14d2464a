"""A team's aspect labels as training rows for the sentence model (`senti aspect-units`): each unit (sentence or
clause) of a text that mentions an aspect of the list (its keywords, as `senti aspects` finds them) becomes a row
labelled with the text's polarity on that aspect. `senti train --model PARENT --dataset UNITS/ --replay OLD` then
continues a two-class model on them, and `senti aspects` answers with it (measured: docs/results/aspects.md).

Input: ASAP's CSV layout (a text column and one column per aspect, coded 1 positive, 0 neutral, -1 negative, -2 not
mentioned), JSONL rows `{"text": ..., "aspects": {name: polarity}}` (polarity one of ASPECT_POLARITIES or ASAP's
codes), or a labels file of `senti label --aspects` (the last answer per text wins). A folder's train, dev and test
files keep their split; a single file is split by text (seeded, in senti's shares: splits.SPLIT_SHARES), so no
text's units are in two splits, and a unit an earlier split holds is not scored again. Only positive and negative
labels make rows (neutral stays the answer's margin); a unit labelled both ways (two aspects of opposite polarity in
one sentence) is left out, counted.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from senti.core.artifacts import SplitRecipe
from senti.core.aspects import ASPECT_POLARITIES, Aspect
from senti.core.errors import DataError
from senti.core.rows import read_rows

ASAP_CODES = {"1": "positive", "0": "neutral", "-1": "negative", "-2": "not_mentioned"}
UNLABELLED = -100  # a (text, aspect) pair the data does not label (gold_matrix): left out of losses and figures
SPLITS = ("train", "dev", "test")


@dataclass
class AspectText:
    text: str
    polarity: dict[str, str]  # aspect name -> one of ASPECT_POLARITIES (the aspects the row labels)


@dataclass
class UnitCounts:
    texts: int = 0
    rows: dict[str, int] = field(default_factory=dict)  # label -> units
    both_ways: int = 0  # units left out: labelled positive for one aspect and negative for another
    repeats: int = 0  # units left out of dev or test: the same unit is in an earlier split (another text said it)
    unknown_aspects: set[str] = field(default_factory=set)  # names in the data that the aspect list does not have


def _polarity(value, where: str, name: str) -> str | None:
    """A labelled polarity from a polarity name or ASAP's code; None for an empty cell."""
    said = str(value).strip()
    if said == "":
        return None
    said = ASAP_CODES.get(said, said)
    if said not in ASPECT_POLARITIES:
        raise DataError(f"{where}: aspect {name!r} is {value!r}; expected one of {', '.join(ASPECT_POLARITIES)} or "
                        f"ASAP's codes {', '.join(ASAP_CODES)}")
    return said


def read_aspect_texts(path: Path, aspects: list[Aspect], text_column: str | None = None) -> list[AspectText]:
    """The labelled texts of one file (see the module's docstring)."""
    from senti.toolkit.data.label_log import is_label_log, resolve_aspect_log

    path = Path(path)
    if is_label_log(path):
        return [AspectText(text, _polarities(said, where)) for text, said, where in resolve_aspect_log(path)]
    names = {a.name for a in aspects}
    texts = []
    for row in read_rows(path, text_column, strict=True):
        record, where = row.record or {}, f"{path}:{row.line}"
        if path.suffix.lower() == ".jsonl":
            given = record.get("aspects")
            if not isinstance(given, dict):
                raise DataError(f"{where}: expected an \"aspects\" object of aspect name -> polarity")
        else:
            given = {k: v for k, v in record.items() if k in names}
        assert row.text is not None
        texts.append(AspectText(row.text, _polarities(given, where)))
    return texts


def _polarities(given: dict, where: str) -> dict[str, str]:
    """The labelled polarities of one text, empty cells left out."""
    said = {name: _polarity(value, where, name) for name, value in given.items()}
    return {name: polarity for name, polarity in said.items() if polarity is not None}


def unit_rows(texts: list[AspectText], aspects: list[Aspect], unit: str, counts: UnitCounts) -> list[tuple[str, str]]:
    """(label, unit) of each unit that mentions an aspect labelled positive or negative, each unit once."""
    from senti.serving.aspects import mentions

    names = {a.name for a in aspects}
    said: dict[str, set[str]] = {}
    for t in texts:
        counts.texts += 1
        counts.unknown_aspects |= set(t.polarity) - names
        for name, evidence in mentions(t.text, aspects, unit).items():
            if t.polarity.get(name) in ("positive", "negative"):
                for e in evidence:
                    said.setdefault(e.text, set()).add(t.polarity[name])
    rows = [(next(iter(labels)), text) for text, labels in said.items() if len(labels) == 1]
    counts.both_ways += len(said) - len(rows)
    return rows


def split_texts(source: Path, aspects: list[Aspect], text_column: str | None, seed: int) -> dict[str, list[AspectText]]:
    """The labelled texts of each split: a folder's train/dev/test files, or one file split by text."""
    from senti.toolkit.data.splits import SPLIT_SHARES, find_split_file

    source = Path(source)
    if source.is_dir():
        found = {s: find_split_file(source, s) for s in SPLITS}
        if found["train"] is None or found["dev"] is None:
            raise DataError(f"{source}: an aspect data folder needs a train and a dev file (.csv, .tsv or .jsonl)")
        return {s: read_aspect_texts(f, aspects, text_column) if f else [] for s, f in found.items()}
    texts = read_aspect_texts(source, aspects, text_column)
    random.Random(seed).shuffle(texts)
    cut_train = int(len(texts) * SPLIT_SHARES[0])
    cut_dev = cut_train + max(1, int(len(texts) * SPLIT_SHARES[1]))
    return {"train": texts[:cut_train], "dev": texts[cut_train:cut_dev], "test": texts[cut_dev:]}


def write_aspect_units(source: Path, aspects: list[Aspect], out: Path, unit: str = "sentence",
                       text_column: str | None = None, seed: int = 0) -> dict[str, UnitCounts]:
    """Write OUT/train.tsv, dev.tsv and test.tsv (label, text_a) of unit rows; each split's counts. DataError when
    train has not both labels to learn from, or dev no row to choose with."""
    from senti.serving.aspects import check_unit

    check_unit(unit)
    parts = split_texts(source, aspects, text_column, seed)
    rows, counts, earlier = {}, {}, set()
    for split, texts in parts.items():  # train, dev, test: a unit an earlier split holds is not scored again
        counts[split] = UnitCounts()
        found = unit_rows(texts, aspects, unit, counts[split])
        rows[split] = [(label, text) for label, text in found if text not in earlier]
        counts[split].repeats = len(found) - len(rows[split])
        for label, _ in rows[split]:
            counts[split].rows[label] = counts[split].rows.get(label, 0) + 1
        earlier |= {text for _, text in found}
    if len(counts["train"].rows) < 2 or not counts["dev"].rows:
        split = "train" if len(counts["train"].rows) < 2 else "dev"
        raise DataError(f"{source}: the {split} split gives {counts[split].rows or 'no'} unit rows; train needs positive "
                        "and negative ones, dev at least one (are the keywords in the texts, the labels positive or "
                        "negative, and dev's texts other than train's?)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for split, part in rows.items():
        tmp = out / f".{split}.tsv.partial"
        tmp.write_text("label\ttext_a\n" + "".join(f"{label}\t{' '.join(text.split())}\n" for label, text in part),
                       encoding="utf-8")
        tmp.replace(out / f"{split}.tsv")
    return counts


def gold_matrix(texts: list[AspectText], names: list[str]) -> np.ndarray:
    """[texts, aspects] class ids (ASPECT_POLARITIES' order), UNLABELLED where a text does not label an aspect."""
    column = {name: j for j, name in enumerate(names)}
    gold = np.full((len(texts), len(names)), UNLABELLED, dtype=np.int64)
    for i, t in enumerate(texts):
        for name, polarity in t.polarity.items():
            if name in column:
                gold[i, column[name]] = ASPECT_POLARITIES.index(polarity)
    return gold


def recorded_aspect_splits(recipe, names: list[str], dataset: str | None, where: Path
                           ) -> tuple[dict[str, list[AspectText]], SplitRecipe]:
    """The splits of a heads model's aspect data (`names` its aspects) cut as its `recipe` says, or `dataset` cut
    with the recipe's seed (42 without one), and the recipe used; DataError when neither is known."""
    if recipe is None and dataset is None:
        raise DataError(f"{where} records no aspect data; pass --dataset")
    if dataset is not None:
        recipe = SplitRecipe(dataset=dataset, seed=recipe.seed if recipe else 42)
    return split_texts(Path(recipe.dataset), [Aspect(name, ()) for name in names], recipe.text_column,
                       recipe.seed), recipe
