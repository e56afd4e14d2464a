"""`senti audit`: the rows of a labelled set whose label disagrees with what everything else says.

Out-of-fold probabilities come from one of three sources (`Source`), then confident learning
(`core.confident_learning`) estimates the noise and names the suspects:
- `ngram`: the character n-gram baseline refitted k times, each fold scored by the fit that did not see it (seconds);
- `vectors`: a logistic regression k times over an encoder's mean-pooled sentence vectors (`--model` a pretrained
  folder or a checkpoint): the encoder is never tuned on the audited labels, so its vectors have not learnt them;
- `model`: a trained model's calibrated probabilities as they are, for rows it was not trained on (a surge label
  log audited with the model that picked the texts); refused when its training hashes show it saw them.
`finetune`: `--model` fine-tuned k times by `senti train` (each fold's rows, its dev carved from them), each held-out
fold scored by the checkpoint that did not see it, with its calibration: k trainings, the slowest;
`ensemble`: the mean of the n-gram and the vector probabilities (the best of these on ChnSentiCorp with flipped
labels, docs/results/labels.md); `both`: the n-gram baseline's suspects that the second source also flags with the
same suggested label.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from senti.core.confident_learning import NoiseEstimate, Suspect, both_flag, estimate_noise, find_suspects
from senti.core.errors import DataError, SentiError

FOLDS = 5
SOURCES = ("ngram", "vectors", "ensemble", "finetune", "model", "both")
VECTOR_C = 1.0  # the logistic regression over sentence vectors (standardised): C=1 was best of 0.1/1/10 on dev


@dataclass(frozen=True)
class AuditRows:
    """The audited labelled rows: texts, label indices into `labels`, and where each came from (FILE:LINE)."""

    texts: list[str]
    given: np.ndarray
    labels: list[str]
    where: list[str]

    def check_folds(self, folds: int, name: str) -> None:
        counts = np.bincount(self.given, minlength=len(self.labels))
        short = {lab: int(n) for lab, n in zip(self.labels, counts) if n < folds}
        if short:
            said = ", ".join(f"'{lab}' has {n}" for lab, n in short.items())
            raise DataError(f"{name}: {folds}-fold audit needs at least {folds} rows per label; {said} "
                            f"(give --folds {max(2, min(counts))} or more rows)")


@dataclass
class AuditResult:
    source: str
    estimate: NoiseEstimate
    suspects: list[Suspect]
    probabilities: np.ndarray
    notes: list[str] = field(default_factory=list)


def fold_indices(rows: AuditRows, folds: int, seed: int):
    """Stratified folds over rows. Copies of a text may fall in different folds on purpose: the label another copy
    was given is evidence about this one (2,671 of ChnSentiCorp's 9,600 training rows have a copy, and holding the
    copies out together cost 5 points of the audit's precision in docs/results/labels.md)."""
    from sklearn.model_selection import StratifiedKFold

    return StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(rows.given)), rows.given)


def out_of_fold(rows: AuditRows, fit_predict: Callable[[np.ndarray, np.ndarray], np.ndarray], folds: int,
                seed: int, progress: Callable[[int], None] | None = None) -> np.ndarray:
    """[n, k] probabilities, each row's from `fit_predict(train_index, held_index)` of the fold that held it out."""
    out = np.zeros((len(rows.texts), len(rows.labels)))
    for n, (train, held) in enumerate(fold_indices(rows, folds, seed), 1):
        out[held] = fit_predict(train, held)
        if progress is not None:
            progress(n)
    return out


def ngram_fit_predict(rows: AuditRows, seed: int):
    """The n-gram baseline fitted on one fold's training rows, its probabilities on the held-out rows."""
    from senti.toolkit.evaluation.baseline import baseline_probabilities, fit_baseline

    def fit_predict(train: np.ndarray, held: np.ndarray) -> np.ndarray:
        pipeline = fit_baseline([rows.texts[i] for i in train], [rows.labels[g] for g in rows.given[train]],
                                rows.labels, seed)
        return baseline_probabilities(pipeline, [rows.texts[i] for i in held], len(rows.labels))

    return fit_predict


def vector_fit_predict(rows: AuditRows, vectors: np.ndarray, seed: int):
    """A standardised logistic regression over sentence vectors, per fold."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def fit_predict(train: np.ndarray, held: np.ndarray) -> np.ndarray:
        model = make_pipeline(StandardScaler(), LogisticRegression(C=VECTOR_C, max_iter=3000, random_state=seed))
        model.fit(vectors[train], rows.given[train])
        out = np.zeros((len(held), len(rows.labels)))
        out[:, model.classes_] = model.predict_proba(vectors[held])
        return out

    return fit_predict


def audit(rows: AuditRows, probabilities: np.ndarray, source: str) -> AuditResult:
    estimate = estimate_noise(probabilities, rows.given)
    return AuditResult(source, estimate, find_suspects(probabilities, rows.given, estimate), probabilities)


def agreeing(first: AuditResult, second: AuditResult) -> AuditResult:
    """`both`: the suspects the two audits share; the noise figures are the first's."""
    return AuditResult("both", first.estimate, both_flag(first.suspects, second.suspects),
                       (first.probabilities + second.probabilities) / 2)


def check_source(source: str, model: Path | None) -> None:
    if source not in SOURCES:
        raise SentiError(f"unknown audit source '{source}'; choose one of {', '.join(SOURCES)}")
    if source != "ngram" and model is None:
        raise SentiError(f"--source {source} needs --model (a pretrained folder, a checkpoint or an export)")


def encoder(spec: Path, labels: list[str], texts: list[str], max_seq_len: int, trust_pickle: bool = False):
    """(the encoder's model, tokenizer) of a checkpoint or a pretrained folder (a Hugging Face folder converted,
    its vocabulary trimmed to `texts`)."""
    from senti.toolkit.training.models import build_model, is_checkpoint

    if is_checkpoint(spec):
        from senti.core.checkpoint import load_checkpoint

        model, tokenizer, _ = load_checkpoint(spec, trust_pickle)
        return model, tokenizer
    model, tokenizer, _ = build_model(str(spec), labels, texts, max_seq_len, trust_pickle)
    return model, tokenizer


def sentence_vectors(model, tokenizer, texts: list[str], max_seq_len: int, batch_size: int = 64,
                     progress: Callable[[int], None] | None = None) -> np.ndarray:
    """[n, hidden] the last hidden states averaged over each text's tokens (e5's and sentence-transformers'
    pooling), in input order."""
    import paddle

    from senti.core.batching import logits_in_order, model_pad_id
    from senti.toolkit.data.batching import encode_texts

    encoded, _ = encode_texts(tokenizer, texts, max_seq_len)
    pad_id = model_pad_id(model)
    done = [0]

    def run(input_ids, token_type_ids):
        ids = paddle.to_tensor(input_ids)
        hidden = model.base_model(ids, token_type_ids=paddle.to_tensor(token_type_ids))[0]
        mask = paddle.cast(ids != pad_id, hidden.dtype).unsqueeze(-1)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clip(min=1)
        done[0] += len(input_ids)
        if progress is not None:
            progress(done[0])
        return pooled.astype("float32").numpy()

    model.eval()
    with paddle.no_grad():
        return logits_in_order(run, encoded, batch_size, pad_id)


@dataclass(frozen=True)
class AuditConfig:
    """`senti audit`'s settings, checked on creation."""

    dataset: str
    output_dir: Path
    source: str = "ngram"
    model: Path | None = None
    split: str = "all"  # every labelled row, or one split of the dataset
    folds: int = FOLDS
    seed: int = 0
    text_column: str | None = None
    label_column: str | None = None
    max_seq_len: int = 128
    trust_pickle: bool = False
    epochs: int = 1  # --source finetune: epochs of each fold's training

    def __post_init__(self) -> None:
        check_source(self.source, self.model)
        if self.split not in ("all", "train", "dev", "test"):
            raise SentiError(f"unknown split '{self.split}'; choose all, train, dev or test")
        if self.folds < 2:
            raise SentiError(f"--folds {self.folds}: a k-fold audit needs 2 folds at least")


def read_audit_rows(config: AuditConfig) -> AuditRows:
    """The labelled rows `config` names: every one of the dataset (a file, a label log, a folder's splits) or one
    split as `senti train` cuts it."""
    from senti.toolkit.data.splits import load_all_rows, load_splits, sort_labels

    if config.split == "all":
        examples = load_all_rows(config.dataset, text_column=config.text_column, label_column=config.label_column)
    else:
        examples = load_splits(config.dataset, text_column=config.text_column,
                               label_column=config.label_column).split(config.split)
    examples = [e for e in examples if e.text]
    labels = sort_labels(e.label for e in examples)
    if len(labels) < 2:
        raise DataError(f"{config.dataset}: {len(examples)} labelled rows of {len(labels)} label(s); an audit "
                        "compares labels, so it needs two at least")
    index = {lab: i for i, lab in enumerate(labels)}
    return AuditRows([e.text for e in examples], np.array([index[e.label] for e in examples], dtype=np.int64),
                     labels, [e.where for e in examples])


Progress = Callable[[str, int, int], None]  # (what, done, of)


def _ngram_probabilities(rows: AuditRows, config: AuditConfig, progress: Progress | None) -> np.ndarray:
    def step(n: int) -> None:
        if progress is not None:
            progress(f"n-gram baseline, {config.folds} folds", n, config.folds)

    return out_of_fold(rows, ngram_fit_predict(rows, config.seed), config.folds, config.seed, step)


def _vector_probabilities(rows: AuditRows, config: AuditConfig, progress: Progress | None) -> np.ndarray:
    assert config.model is not None  # AuditConfig checked it
    model, tokenizer = encoder(config.model, rows.labels, rows.texts, config.max_seq_len, config.trust_pickle)

    def embedded(n: int) -> None:
        if progress is not None:
            progress(f"sentence vectors of {config.model}", n, len(rows.texts))

    vectors = sentence_vectors(model, tokenizer, rows.texts, config.max_seq_len, progress=embedded)
    return out_of_fold(rows, vector_fit_predict(rows, vectors, config.seed), config.folds, config.seed)


def _finetune_probabilities(rows: AuditRows, config: AuditConfig, progress: Progress | None) -> np.ndarray:
    """`--model` trained on each fold's other rows by senti train (in a scratch folder inside --output-dir, removed
    after), the held-out rows scored with the fold checkpoint's calibrated probabilities."""
    import json
    import shutil
    import tempfile

    from senti.toolkit.evaluation.evaluate import Scorer
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".folds-", dir=config.output_dir))
    done = [0]

    def fit_predict(train: np.ndarray, held: np.ndarray) -> np.ndarray:
        fold = scratch / f"fold{done[0]}"
        (fold / "data").mkdir(parents=True)
        (fold / "data" / "train.jsonl").write_text("".join(
            json.dumps({"text": rows.texts[i], "label": rows.labels[rows.given[i]]}, ensure_ascii=False) + "\n"
            for i in train), encoding="utf-8")
        run_training(TrainConfig(model=str(config.model), dataset=str(fold / "data"), output_dir=str(fold / "ckpt"),
                                 epochs=config.epochs, max_seq_len=config.max_seq_len, seed=config.seed,
                                 trust_pickle=config.trust_pickle, baseline=False), say=lambda _: None)
        scorer = Scorer(fold / "ckpt")
        probabilities = scorer.probabilities([rows.texts[i] for i in held])[1]
        shutil.rmtree(fold, ignore_errors=True)
        done[0] += 1
        if progress is not None:
            progress(f"{config.model} fine-tuned on {config.folds} folds", done[0], config.folds)
        return probabilities[:, [scorer.labels.index(lab) for lab in rows.labels]]

    try:
        return out_of_fold(rows, fit_predict, config.folds, config.seed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


SEEN_LIMIT = 0.05  # a model trained on more of the audited rows than this cannot audit them (it learnt their labels)


def _model_probabilities(rows: AuditRows, config: AuditConfig) -> tuple[np.ndarray, list[str]]:
    """A trained model's calibrated probabilities, its labels matched to the rows' by name."""
    from senti.toolkit.data.seen import seen_mask
    from senti.toolkit.evaluation.evaluate import Scorer

    assert config.model is not None
    scorer = Scorer(config.model, trust_pickle=config.trust_pickle).sentence_only()
    missing = [lab for lab in rows.labels if lab not in scorer.labels]
    if missing:
        raise DataError(f"{config.model} answers {', '.join(scorer.labels)}; the rows also hold "
                        f"{', '.join(missing)}")
    seen = seen_mask(config.model, rows.texts)
    notes = []
    if seen is not None and seen.any():
        share = float(seen.mean())
        if share > SEEN_LIMIT:
            raise DataError(f"{config.model} was trained on {int(seen.sum())} of these {len(rows.texts)} rows: its "
                            "probabilities on them repeat the labels it learnt; audit with --source ngram or "
                            "vectors (k-fold), or with a model that did not see them")
        notes.append(f"{int(seen.sum())} of the rows were in the model's training texts")
    probabilities = scorer.probabilities(rows.texts)[1]
    order = [scorer.labels.index(lab) for lab in rows.labels]
    kept = probabilities[:, order]
    return kept / np.maximum(kept.sum(1, keepdims=True), 1e-300), notes


def audit_probabilities(rows: AuditRows, config: AuditConfig, progress: Progress | None = None) -> AuditResult:
    """The audit `config.source` names over `rows`."""
    if config.source in ("ngram", "both"):
        first = audit(rows, _ngram_probabilities(rows, config, progress), "ngram")
        if config.source == "ngram":
            return first
        from senti.toolkit.training.models import is_checkpoint

        assert config.model is not None  # AuditConfig checked it
        second_source = "model" if is_checkpoint(config.model) or _is_export(config.model) else "vectors"
        return agreeing(first, audit_probabilities(rows, _with_source(config, second_source), progress))
    if config.source == "vectors":
        return audit(rows, _vector_probabilities(rows, config, progress), "vectors")
    if config.source == "finetune":
        return audit(rows, _finetune_probabilities(rows, config, progress), "finetune")
    if config.source == "ensemble":
        mean = (_ngram_probabilities(rows, config, progress) + _vector_probabilities(rows, config, progress)) / 2
        return audit(rows, mean, "ensemble")
    probabilities, notes = _model_probabilities(rows, config)
    result = audit(rows, probabilities, "model")
    result.notes.extend(notes)
    return result


def _is_export(path: Path | None) -> bool:
    from senti.core import layout

    return path is not None and (Path(path) / layout.EXPORT_META).is_file()


def _with_source(config: AuditConfig, source: str) -> AuditConfig:
    from dataclasses import replace

    return replace(config, source=source)


def suspect_records(rows: AuditRows, result: AuditResult) -> list[dict]:
    """One JSON object per suspect, largest margin first: where it is (FILE:LINE and the line), the text, the given
    and the suggested label, the margin (`score`) and every label's probability."""
    out = []
    for rank, s in enumerate(result.suspects, 1):
        where = rows.where[s.index]
        line = where.rsplit(":", 1)[-1]
        file = where.rsplit(":", 1)[0]
        out.append({"rank": rank, "where": where, "file": str(Path(file).resolve()) if line.isdigit() else None,
                    "line": int(line) if line.isdigit() else None,
                    "text": rows.texts[s.index], "label": rows.labels[s.given],
                    "suggested": rows.labels[s.suggested], "score": round(s.margin, 6),
                    "probabilities": {lab: round(float(p), 6)
                                      for lab, p in zip(rows.labels, result.probabilities[s.index])}})
    return out


def audit_report(rows: AuditRows, result: AuditResult, config: AuditConfig, seconds: float):
    from senti.toolkit.records import AuditReport, ClassNoise

    estimate = result.estimate
    flagged = np.bincount([s.given for s in result.suspects], minlength=len(rows.labels))
    per_class = {lab: ClassNoise(int(estimate.given_counts[i]), round(float(estimate.thresholds[i]), 6),
                                 round(float(estimate.noise_per_class[i]), 6), int(flagged[i]))
                 for i, lab in enumerate(rows.labels)}
    accuracy = float((result.probabilities.argmax(1) == rows.given).mean())
    return AuditReport(dataset=config.dataset, split=config.split, source=config.source, labels=rows.labels,
                       rows=len(rows.texts), folds=None if config.source == "model" else config.folds,
                       seed=config.seed, out_of_fold_accuracy=round(accuracy, 6),
                       confident_joint=estimate.confident_joint.tolist(), per_class=per_class,
                       noise_count=estimate.noise_count, suspects=len(result.suspects), seconds=round(seconds, 1),
                       model=str(config.model) if config.model is not None else None)


def write_audit(output_dir: Path, records: list[dict], report, overwrite: bool = False) -> Path:
    """DIR/suspects.jsonl and DIR/audit.json, each written whole beside its name and renamed over it."""
    import json

    from senti.core import layout
    from senti.core.artifacts import write_text_atomic

    output_dir = Path(output_dir)
    target = output_dir / layout.AUDIT_SUSPECTS
    if target.exists() and not overwrite:
        raise SentiError(f"{target} exists (an earlier audit, perhaps under review); give --overwrite or another "
                         "--output-dir")
    output_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    report.write(output_dir)
    return target


def run_audit(config: AuditConfig, progress: Progress | None = None, overwrite: bool = False):
    """Read the rows, audit them, write DIR/suspects.jsonl and DIR/audit.json: (report, result, rows)."""
    import time

    started = time.perf_counter()
    rows = read_audit_rows(config)
    if config.source != "model":
        rows.check_folds(config.folds, config.dataset)
    result = audit_probabilities(rows, config, progress)
    report = audit_report(rows, result, config, time.perf_counter() - started)
    write_audit(config.output_dir, suspect_records(rows, result), report, overwrite)
    return report, result, rows


def default_source(model: Path | None) -> str:
    """ngram without a model; with one, ensemble for a pretrained folder (its vectors beside the n-gram baseline)
    and both for a trained model (its own probabilities, where it did not see the rows)."""
    from senti.toolkit.training.models import is_checkpoint

    if model is None:
        return "ngram"
    return "both" if is_checkpoint(Path(model)) or _is_export(Path(model)) else "ensemble"


def aspect_rows(config: AuditConfig) -> dict[str, AuditRows] | None:
    """Per aspect, the texts of an aspect label log (senti label --aspects) answered for it, their polarity as the
    label; None when the dataset is not such a log."""
    from senti.core.aspects import ASPECT_POLARITIES
    from senti.toolkit.data.label_log import is_label_log, resolve_aspect_log

    path = Path(config.dataset).expanduser()
    if not is_label_log(path):
        return None
    answered = resolve_aspect_log(path)
    if not answered:
        return None
    per_aspect: dict[str, tuple[list[str], list[str], list[str]]] = {}
    for text, polarities, where in answered:
        for aspect, polarity in polarities.items():
            texts, given, places = per_aspect.setdefault(aspect, ([], [], []))
            texts.append(text)
            given.append(polarity)
            places.append(where)
    out = {}
    for aspect, (texts, given, places) in sorted(per_aspect.items()):
        labels = [p for p in ASPECT_POLARITIES if p in set(given)]
        index = {lab: i for i, lab in enumerate(labels)}
        out[aspect] = AuditRows(texts, np.array([index[g] for g in given], dtype=np.int64), labels, places)
    return out


def run_aspect_audit(config: AuditConfig, progress: Progress | None = None, overwrite: bool = False):
    """Each aspect of an aspect label log audited as a label set of its own, into DIR/ASPECT/: [(aspect, report or
    None, why it was not audited, its folder)]."""
    import time
    from dataclasses import replace

    found = aspect_rows(config)
    if found is None:
        raise DataError(f"{config.dataset}: not a label log of senti label --aspects")
    done: list[tuple[str, object, str | None, Path | None]] = []
    for aspect, rows in found.items():
        started = time.perf_counter()
        counts = np.bincount(rows.given, minlength=len(rows.labels))
        if len(rows.labels) < 2 or counts.min() < config.folds:
            said = ", ".join(f"{lab} {n}" for lab, n in zip(rows.labels, counts))
            done.append((aspect, None, f"too few rows for a {config.folds}-fold audit ({said})", None))
            continue
        result = audit_probabilities(rows, replace(config, source="ngram"), progress)
        report = audit_report(rows, result, replace(config, source="ngram"), time.perf_counter() - started)
        report.aspect = aspect
        folder = aspect if re.fullmatch(r"[\w-]{1,64}", aspect) else f"aspect-{len(done) + 1}"  # a name from the log
        write_audit(Path(config.output_dir) / folder, suspect_records(rows, result), report, overwrite)
        done.append((aspect, report, None, Path(config.output_dir) / folder))
    return done


def is_aspect_log(dataset: str) -> bool:
    """Whether `dataset` is a label log holding aspect answers (senti label --aspects)."""
    from senti.toolkit.data.label_log import is_label_log, resolve_aspect_log

    path = Path(dataset).expanduser()
    return is_label_log(path) and bool(resolve_aspect_log(path))
