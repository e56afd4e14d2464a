"""Scoring a dynamic-graph model on a split: logits, accuracy, macro-F1, confusion matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from senti.core.batching import logits_in_order
from senti.core.errors import SentiError
from senti.toolkit.data.seen import seen_figures, seen_mask
from senti.toolkit.evaluation.metrics import classification_metrics
from senti.toolkit.records import (
    AbstainFigures,
    AspectEvalRecord,
    DomainReport,
    EvalRecord,
    PairFigures,
    ScoreCalibration,
)


def predict_logits(model, encoded, batch_size: int = 64, pad_id: int | None = None, parts: bool = False):
    """Logits for every encoded text, in input order (batches are length-sorted internally), padded with the
    model's own padding id unless `pad_id` says another; with `parts`, a model with the n-gram head answers
    (ERNIE's logits, the n-gram side's logits)."""
    import paddle

    from senti.core.batching import model_pad_id

    pad_id = model_pad_id(model) if pad_id is None else pad_id

    def run(input_ids, token_type_ids):
        out = model(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids),
                    **({"return_parts": True} if parts else {}))
        if parts:
            return np.concatenate([o.astype("float32").numpy() for o in out], axis=1)
        return out.astype("float32").numpy()

    was_training = model.training
    model.eval()
    with paddle.no_grad():
        out = logits_in_order(run, encoded, batch_size, pad_id)
    if was_training:
        model.train()
    if parts:
        return out[:, : out.shape[1] // 2], out[:, out.shape[1] // 2:]
    return out


def _rows_to_score(meta_labels: list[str], recipe, dataset: str | None, split: str, where: Path,
                   seed: int | None = None):
    """(rows, data record): one split cut as the model's recipe says (or `dataset` cut with `seed`), or every row."""
    from dataclasses import asdict

    from senti.core.errors import SentiError
    from senti.toolkit.data.splits import load_all_rows, recorded_dataset, recorded_splits

    if split == "all":
        source = dataset or (recipe.dataset if recipe else None)
        if source is None:
            raise SentiError(f"{where} does not record what it was trained on; pass --dataset")
        columns = dict(text_column=recipe.text_column, label_column=recipe.label_column) \
            if recipe and recorded_dataset(source) == recorded_dataset(recipe.dataset) else {}
        rows, data = load_all_rows(source, **columns), {"dataset": source, "split": "all"}
    else:
        splits, chosen = recorded_splits(where, recipe, dataset, seed)
        rows, data = splits.split(split), asdict(chosen)
    if not rows:
        raise SentiError(f"{data['dataset']}: the {split} split is empty")
    unknown = sorted({e.label for e in rows} - set(meta_labels))
    if unknown:
        raise SentiError(f"{data['dataset']} {split}: labels {unknown} are not among the model's labels {meta_labels}"
                         f"{_binary_hint(data['dataset'], unknown, meta_labels)}")
    return rows, data


def _binary_hint(dataset: str, unknown: list[str], labels: list[str]) -> str:
    """What to say when a file of ChnSentiCorp's layout (0/1) meets a model that answers negative/positive: the
    names are given to 0 and 1 for a folder in that layout, not a lone file."""
    from senti.toolkit.data.splits import BINARY_NAMES

    path = Path(dataset)
    if path.is_file() and set(unknown) <= set(BINARY_NAMES) and set(labels) == set(BINARY_NAMES.values()):
        return (f"; 0 and 1 are read as negative and positive in a folder of ChnSentiCorp's layout: give the folder "
                f"({path.parent}) with --split {path.stem if path.stem in ('train', 'dev', 'test') else 'all'}")
    return ""


def baseline_beside(where: Path, recipe, dataset: str | None, scored: dict[str, list], labels: list[str],
                    seed: int | None = None) -> dict:
    """The n-gram baseline fitted once on the training split the model learned from (or, for a model that records
    none, `dataset`'s cut with `seed`, as the rows were), scored on each named set of rows: what the cheapest
    honest model gets on the same texts."""
    from senti.core.errors import DataError
    from senti.toolkit.data.splits import recorded_splits
    from senti.toolkit.evaluation.baseline import baseline_figures

    try:
        splits, _ = recorded_splits(where, recipe, *((dataset, seed) if recipe is None else (None, None)))
    except DataError as err:  # no training rows to fit it on (a test-only folder, a model that records no data)
        return {"model": None, "skipped": str(err)}
    train = [e for e in splits.train if e.label in labels]
    return baseline_figures([e.text for e in train], [e.label for e in train], labels,
                            {name: ([e.text for e in rows], [e.label for e in rows]) for name, rows in scored.items()})


class Scorer:
    """A model as `senti eval` scores it: a checkpoint in the dynamic graph or an export folder with the runtime
    that serves it (`backend`, default what `auto` picks: the accuracy of the deployed INT8 model)."""

    def __init__(self, model_dir, batch_size: int = 64, trust_pickle: bool = False, backend: str = "auto"):
        from senti.core import layout

        self.folder, self.batch_size = Path(model_dir), batch_size
        self.predictor: Any = None
        if (self.folder / layout.EXPORT_META).is_file():
            from senti.serving import Predictor

            self.predictor = Predictor.load(model_dir, backend=backend)
            self.labels, self.backend = self.predictor.labels, self.predictor.backend_name
            self.recipe = self.predictor.meta.data
            self.calibration, self.abstain = self.predictor.calibration, self.predictor.abstain
        else:
            from senti.core.checkpoint import load_checkpoint

            self.model, self.tokenizer, meta = load_checkpoint(self.folder, trust_pickle)
            self.labels, self.backend, self.recipe = meta.labels, "paddle dynamic graph", meta.data
            self.max_seq_len = meta.max_seq_len
            self.calibration, self.abstain = meta.calibration, None
        # each scored group's (plain softmax, calibrated probabilities, gold ids), for the plots
        self.scored: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        from senti.core.aspects import head_aspects

        self.heads = head_aspects(self.labels)  # the aspects of a model with aspect heads, else None

    def sentence_only(self) -> Scorer:
        """This scorer, for a figure of sentence labels; SentiError for a model with aspect heads."""
        if self.heads is not None:
            raise SentiError(f"{self.folder} has aspect heads (senti train --aspects): scored per aspect on one split "
                             "of its aspect data (senti eval --model MODEL [--split dev]), not by domain")
        return self

    def logits(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(logits per text, whether each text was truncated)."""
        if self.predictor is not None:
            logits, _, too_long = self.predictor.logits(texts, self.batch_size)
            return logits, np.asarray(too_long, dtype=bool)
        from senti.toolkit.data.batching import encode_marking_cuts

        encoded, cut = encode_marking_cuts(self.tokenizer, texts, self.max_seq_len)
        return predict_logits(self.model, encoded, self.batch_size), np.asarray(cut, dtype=bool)

    def probabilities(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the plain softmax, the probabilities the model answers with its calibration, whether each text was
        truncated)."""
        from senti.core.calibration import calibrated_probabilities

        logits, cut = self.logits(texts)
        return calibrated_probabilities(logits, None), calibrated_probabilities(logits, self.calibration), cut

    def predict(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(predicted label indices, whether each text was truncated): the answers the model gives."""
        _, probs, cut = self.probabilities(texts)
        return probs.argmax(1), cut

    def score(self, rows) -> dict:
        """Accuracy, macro-F1, per class, confusion matrix, truncation and the training-text overlap on `rows`."""
        return self.score_groups({"": rows})[""]

    def score_groups(self, groups: dict[str, list]) -> dict[str, dict]:
        """`score` of each group of rows, from one pass of the model over all of them (a thousand small groups
        scored one by one took most of a minute)."""
        rows = [e for group in groups.values() for e in group]
        texts = [e.text for e in rows]
        raw, probs, cut = self.probabilities(texts)
        predicted = probs.argmax(1)
        gold = np.array([self.labels.index(e.label) for e in rows])
        seen = seen_mask(self.folder, texts)
        results, start = {}, 0
        for name, group in groups.items():
            part = slice(start, start + len(group))
            start += len(group)
            self.scored[name] = (raw[part], probs[part], gold[part])
            results[name] = {**classification_metrics(gold[part], predicted[part], self.labels),
                             "truncated_texts": int(cut[part].sum()),
                             "seen_in_training": None if seen is None else
                             seen_figures(seen[part], gold[part], predicted[part]),
                             "calibration": self.calibration_figures(raw[part], probs[part], gold[part])}
        return results

    def calibration_figures(self, raw: np.ndarray, probs: np.ndarray, gold: np.ndarray) -> ScoreCalibration:
        """The probabilities' calibration on one group, plain and calibrated, and the abstention threshold's share
        answered and precision there."""
        from senti.core.calibration import figures, unsure_mask

        abstain = None
        if self.abstain is not None and len(gold):
            unsure = unsure_mask(probs, self.abstain)
            answered = ~unsure
            precision = float((probs.argmax(1)[answered] == gold[answered]).mean()) if answered.any() else 0.0
            abstain = AbstainFigures(self.abstain.threshold, self.abstain.target, float(answered.mean()), precision,
                                     int(unsure.sum()))
        return ScoreCalibration(raw=figures(raw, gold), calibrated=figures(probs, gold) if self.calibration else None,
                                temperature=self.calibration.temperature if self.calibration else None,
                                abstain=abstain)


def write_plots(scorer: Scorer, output: Path) -> list[Path]:
    """The reliability diagram and the risk-coverage curve of what `scorer` last scored, beside `output` (the
    evaluation's JSON file): `eval_test.calibration.png`, `eval_test.risk_coverage.png`."""
    from senti.core import layout
    from senti.toolkit.evaluation.plots import plot_reliability, plot_risk_coverage

    scored = {name: group for name, group in scorer.scored.items() if len(group[2])}
    if not scored:
        return []
    output = Path(output)
    paths = [output.with_name(layout.eval_plot(output.name, kind)) for kind in ("calibration", "risk_coverage")]
    plot_reliability(scored, paths[0], scorer.calibration is not None)
    plot_risk_coverage(scored, paths[1])
    return paths


def evaluate_model(model_dir, dataset: str | None = None, split: str = "test", batch_size: int = 64,
                   trust_pickle: bool = False, backend: str = "auto", baseline: bool = True,
                   seed: int | None = None) -> EvalRecord:
    """Score a checkpoint (dynamic graph) or an export folder (its serving runtime) on one split of the data it
    was trained on (cut as in training), of `dataset`, or on every row (`split="all"`); the record eval_<split>.json
    holds."""
    return evaluate_split(Scorer(model_dir, batch_size, trust_pickle, backend), dataset, split, baseline, seed)


def evaluate_split(scorer: Scorer, dataset: str | None = None, split: str = "test", baseline: bool = True,
                   seed: int | None = None) -> EvalRecord:
    """`evaluate_model` with the model loaded (`scorer`), which keeps what it scored for `write_plots`."""
    scorer = scorer.sentence_only()
    rows, data = _rows_to_score(scorer.labels, scorer.recipe, dataset, split, scorer.folder, seed)
    result = scorer.score(rows)
    if baseline:
        record = baseline_beside(scorer.folder, scorer.recipe, dataset, {"scored": rows}, scorer.labels, seed)
        result["baseline"] = record
    return EvalRecord.typed({**result, "dataset": data["dataset"], "split": split, "data": data,
                             "model": str(scorer.folder.resolve()), "backend": scorer.backend})


def model_labels(folder: Path) -> list[str]:
    """The labels an export folder or a checkpoint answers, read from its metadata (nothing is loaded)."""
    from senti.core import layout
    from senti.core.checkpoint import read_meta
    from senti.serving.export_folder import read_meta as read_export_json

    folder = Path(folder)
    return read_export_json(folder)[0].labels if (folder / layout.EXPORT_META).is_file() else read_meta(folder).labels


def evaluate_heads(scorer: Scorer, dataset: str | None = None, split: str = "test") -> AspectEvalRecord:
    """A model with aspect heads scored on one split of its aspect data (cut as in training) or of `dataset`:
    4-way accuracy, macro-F1 and mention F1 over the labelled pairs, overall and per aspect."""
    from senti.core.calibration import scaled_logits
    from senti.export.parity import answers
    from senti.toolkit.data.aspect_units import gold_matrix, recorded_aspect_splits
    from senti.toolkit.evaluation.metrics import pair_figures

    assert scorer.heads is not None
    parts, recipe = recorded_aspect_splits(scorer.recipe, scorer.heads, dataset, scorer.folder)
    source = recipe.dataset
    if split not in parts or not parts[split]:
        raise SentiError(f"{source}: the {split} split holds no text")
    texts = parts[split]
    gold = gold_matrix(texts, scorer.heads)
    # the answers the runtimes give: each head's argmax of its calibrated probabilities
    said = answers(scaled_logits(scorer.logits([t.text for t in texts])[0], scorer.calibration), len(scorer.heads))
    per_aspect = {name: PairFigures.from_json(pair_figures(gold[:, [j]], said[:, [j]]))
                  for j, name in enumerate(scorer.heads)}
    return AspectEvalRecord(model=str(scorer.folder.resolve()), backend=scorer.backend, dataset=source, split=split,
                            texts=len(texts), figures=PairFigures.from_json(pair_figures(gold, said)),
                            per_aspect=per_aspect)


def evaluate_checkpoint(model_dir, dataset: str | None = None, split: str = "test", batch_size: int = 64,
                        trust_pickle: bool = False, baseline: bool = True, seed: int | None = None) -> EvalRecord:
    """`evaluate_model` for a checkpoint folder (the name senti's API has always had)."""
    return evaluate_model(model_dir, dataset, split, batch_size, trust_pickle, "auto", baseline, seed)


def domain_rows(datasets: list[str], split: str, labels: list[str], where: Path, recipe, seed: int | None = None,
                group_by: str | None = None) -> dict[str, list]:
    """{domain name: rows}: `split` of each dataset (named by its file or folder), or, with `group_by`, every row
    of the one dataset file grouped by that column's value."""
    if group_by is None:
        twice = sorted({d for d in datasets if datasets.count(d) > 1})
        if twice:
            from senti.core.errors import DataError

            raise DataError(f"--dataset {twice[0]} is given twice: each dataset is one row of the table")
        names = [Path(d).name or d for d in datasets]
        if len(set(names)) < len(names):
            names = list(datasets)  # two folders of one name: the paths tell them apart
        return {name: _rows_to_score(labels, recipe, d, split, where, seed)[0] for name, d in zip(names, datasets)}
    from senti.core.errors import DataError
    from senti.core.rows import read_rows

    if len(datasets) != 1 or not Path(datasets[0]).is_file():
        raise DataError("--group-by reads one labelled file: give exactly one --dataset FILE")
    path = Path(datasets[0])
    group_of: dict[str, str] = {}
    for row in read_rows(path, with_labels=True, strict=True):
        record = row.record or {}
        if group_by not in record:
            raise DataError(f"{path}:{row.line}: no column '{group_by}' (--group-by)")
        value = record[group_by]
        if value is None or not str(value).strip():
            raise DataError(f"{path}:{row.line}: column '{group_by}' is empty; every row needs a group (--group-by)")
        group_of[f"{path}:{row.line}"] = str(value)
    groups: dict[str, list] = {}
    for e in _rows_to_score(labels, None, str(path), "all", where)[0]:
        groups.setdefault(group_of[e.where], []).append(e)
    return dict(sorted(groups.items()))


def evaluate_domains(scorer: Scorer, datasets: list[str], split: str = "test", baseline: bool = True,
                     seed: int | None = None, group_by: str | None = None) -> DomainReport:
    """One model (`scorer`) on several domains: each dataset's `split` (or one file's rows grouped by `group_by`),
    with accuracy, macro-F1, the baseline (fitted once, on the model's own training split) and how many texts the
    model had seen, per domain. A shop running one model over many product kinds reads this table first."""
    scorer = scorer.sentence_only()
    domains = domain_rows(datasets, split, scorer.labels, scorer.folder, scorer.recipe, seed, group_by)
    record = baseline_beside(scorer.folder, scorer.recipe, datasets[0], domains, scorer.labels, seed) if baseline \
        else None
    results = scorer.score_groups(domains)
    for name, result in results.items():
        if record is not None:
            result["baseline"] = {**{k: record[k] for k in ("model", "fit_seconds", "train_rows", "skipped")
                                     if k in record}, **({"scored": record[name]} if name in record else {})}
    return DomainReport.typed({"model": str(scorer.folder.resolve()), "backend": scorer.backend,
                               "split": "all" if group_by else split, "group_by": group_by, "datasets": list(datasets),
                               "domains": results})


def choose_ngram_weight(model, dev_ids, dev_y, train_counts: np.ndarray | None = None,
                        held: float | None = None, by_log_loss: bool = False) -> tuple[dict, np.ndarray]:
    """Set the n-gram side's weight to the one most accurate on dev (core.ngram_head.WEIGHT_GRID), or to `held`
    when given (a dev set too small to choose it, and a parent that chose it on more), or, `by_log_loss`, to the one
    with the lowest dev log-loss (a few dozen dev texts tie on accuracy), and, given the
    training rows per class, the logit adjustment with the best dev macro-F1 (core.ngram_head.TAU_GRID); returns
    the record's fields (the weight, tau, each side's dev accuracy alone) and the model's dev scores as it now
    answers, from the same one pass over dev."""
    from senti.core.ngram_head import adjustment_offsets, best_tau, best_weight, combine_numpy, likeliest_weight

    deep, wide = predict_logits(model, dev_ids, parts=True)
    chosen = likeliest_weight if by_log_loss else best_weight
    weight = chosen(deep, wide, dev_y)[0] if held is None else held
    model.config.ngram_weight = weight
    fields = {"ngram_weight": weight, "dev_accuracy_ernie": float((deep.argmax(1) == dev_y).mean()),
              "dev_accuracy_ngram": float((wide.argmax(1) == dev_y).mean())}
    scores = combine_numpy(deep, wide, weight)
    if train_counts is None:
        model.config.class_offsets = None
        return fields, scores
    tau, _ = best_tau(scores, dev_y, train_counts)
    offsets = adjustment_offsets(train_counts, tau) if tau else None
    model.config.class_offsets = offsets
    return {**fields, "logit_adjustment_tau": tau}, scores if offsets is None else scores + offsets
