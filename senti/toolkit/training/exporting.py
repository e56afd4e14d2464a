"""`senti export` from the toolkit's side: parity texts cut from the data the checkpoint was trained on,
and training texts for the static INT8 calibration."""

from __future__ import annotations

from pathlib import Path

from senti.core.artifacts import ExportMeta, SplitRecipe
from senti.core.aspects import head_aspects
from senti.core.checkpoint import read_meta
from senti.core.errors import SentiError
from senti.toolkit.data.splits import recorded_splits


def export_texts(model_dir: Path, dataset: str | None, limit: int | None) -> tuple[list[str], list, SplitRecipe, list[str]]:
    """Parity texts and their labels (the dev split, at most `limit`; for aspect heads each text's list of
    "aspect/polarity" labels), the split recipe, and calibration texts (the training split): of the checkpoint's own
    data unless `dataset` names another one."""
    from senti.export.pipeline import CALIBRATION_TEXTS

    meta = read_meta(model_dir)  # a folder that is not a checkpoint fails here, before any data is read
    names = head_aspects(meta.labels)
    if names is not None:
        return aspect_texts(Path(model_dir), meta.data, names, dataset, limit)
    try:
        splits, recipe = recorded_splits(Path(model_dir), meta.data, dataset)
    except SentiError as err:
        raise SentiError(f"parity texts: {err} (pass --dataset to choose others)") from None
    rows = splits.dev[:limit]
    return ([e.text for e in rows], [e.label for e in rows], recipe,
            [e.text for e in splits.train[:CALIBRATION_TEXTS]])


def aspect_texts(model_dir: Path, recipe: SplitRecipe | None, names: list[str], dataset: str | None, limit: int | None
                 ) -> tuple[list[str], list, SplitRecipe, list[str]]:
    """`export_texts` for aspect heads: the dev texts with each one's "aspect/polarity" labels."""
    from senti.core.aspects import HEAD_SEPARATOR
    from senti.export.pipeline import CALIBRATION_TEXTS
    from senti.toolkit.data.aspect_units import recorded_aspect_splits

    parts, recipe = recorded_aspect_splits(recipe, names, dataset, model_dir)
    dev = parts["dev"][:limit]
    gold = [[f"{name}{HEAD_SEPARATOR}{p}" for name, p in t.polarity.items() if name in names] for t in dev]
    return [t.text for t in dev], gold, recipe, [t.text for t in parts["train"][:CALIBRATION_TEXTS]]


def export_checkpoint(config, dataset: str | None = None, parity_samples: int = 1000, say=print) -> ExportMeta:
    """Export per `config` (an ExportConfig), proving parity on up to `parity_samples` dev texts; returns
    the export's metadata as written."""
    from senti.export.pipeline import export_model

    # an abstention threshold is chosen on the whole dev split, not a sample of it
    limit = None if config.abstain else parity_samples
    texts, gold, recipe, calibration = export_texts(Path(config.model), dataset, limit)
    return export_model(config, texts, gold, say=say, data=recipe, calibration_texts=calibration)
