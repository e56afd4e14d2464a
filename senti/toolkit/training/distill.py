"""`senti distill`: knowledge distillation from a fine-tuned teacher checkpoint into a small student.

Loss = a weighted sum of named terms from `LOSSES` (default: alpha * T^2 * KL(teacher_T || student_T)
+ (1 - alpha) * CE(student, gold) [+ w * hidden MSE]); each term is logged on its own.
The teacher's logits are computed once, for the training rows and any extra unlabeled texts
(which the teacher labels; they carry no hard-label term), and cached for every epoch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from senti.core import layout
from senti.core.artifacts import SplitRecipe
from senti.core.batching import pad_batch
from senti.core.checkpoint import ModelSource, check_weights_format
from senti.core.errors import SentiError
from senti.core.sequence import length_to_use
from senti.serving.tokenizer import read_vocab
from senti.toolkit.data.batching import encode_texts
from senti.toolkit.data.seen import training_hashes
from senti.toolkit.data.splits import load_recipe, recorded_dataset
from senti.toolkit.data.unlabeled import unlabeled_texts
from senti.toolkit.evaluation.calibrate import calibrate_checkpoint
from senti.toolkit.evaluation.evaluate import predict_logits
from senti.toolkit.evaluation.metrics import classification_metrics
from senti.toolkit.records import DataStats, DistillReport, DistillSide, ExtraTexts, TrainingMetrics
from senti.toolkit.training.checkpoint import checkpoint_meta, versions
from senti.toolkit.training.config import DistillConfig
from senti.toolkit.training.models import (
    SHAPES,
    classifier_class,
    default_lr,
    ernie_config,
    is_checkpoint,
    pretrained_folder,
    readable_folder,
)
from senti.toolkit.training.run import ClassifierRun, Step, resolve_precision

# ERNIE 3.0's small shapes under their usual names, plus every named shape.
STUDENT_PRESETS = {"tiny-4l-312h": "4l-312h", **{name: name for name in SHAPES}}


# --- adaptors: every model is reached the same way ---------------------------------------------

def logits_and_hidden(model, input_ids, token_type_ids, hidden: bool):
    """(logits, hidden states or None): hidden states are the embedding output then each layer's."""
    if not hidden:
        return model(input_ids, token_type_ids=token_type_ids), None
    out = model(input_ids, token_type_ids=token_type_ids, output_hidden_states=True, return_dict=True)
    return out.logits, out.hidden_states


# --- losses, chosen by name: one signature, each term logged on its own ----------------------------

@dataclass
class LossInputs:
    """What a loss may read for one batch: student (`_s`) and teacher (`_t`) outputs, gold labels."""

    logits_s: Any
    logits_t: Any
    labels: Any  # -1 marks teacher-labelled extra texts
    temperature: float
    hidden_s: Any = None
    hidden_t: Any = None
    projections: list = field(default_factory=list)
    layers: list = field(default_factory=list)
    token_mask: Any = None


def soft_kl(b: LossInputs):
    """KL(teacher || student) at temperature T, scaled by T^2 so gradients keep their size (Hinton)."""
    import paddle.nn.functional as F

    log_p_s = F.log_softmax(b.logits_s / b.temperature, axis=-1)
    p_t = F.softmax(b.logits_t / b.temperature, axis=-1)
    kl = F.kl_div(log_p_s, p_t, reduction="batchmean")  # type: ignore[arg-type]  # paddle's stubs omit batchmean
    return kl * b.temperature**2


def hard_ce(b: LossInputs):
    """Cross-entropy on the rows with gold labels (label -1 marks teacher-labelled extra texts)."""
    import paddle
    import paddle.nn.functional as F

    mask = b.labels >= 0
    if not bool(mask.any()):
        return paddle.zeros([], dtype="float32")
    return F.cross_entropy(b.logits_s[mask], b.labels[mask])


def hidden_mse(b: LossInputs):
    """Mean over mapped layers of the MSE between projected student and teacher states on real tokens."""
    import paddle

    total = paddle.zeros([], dtype="float32")
    weights = b.token_mask.astype("float32").unsqueeze(-1)
    for (s, t), project in zip(b.layers, b.projections):
        diff = (project(b.hidden_s[s].astype("float32")) - b.hidden_t[t].astype("float32")) ** 2 * weights
        total = total + diff.sum() / (weights.sum() * diff.shape[-1])
    return total / len(b.layers)


@dataclass(frozen=True)
class Loss:
    """A distillation term: `fn(LossInputs) -> scalar tensor`; `needs_hidden`: it reads every layer's states
    of both models (costly: the teacher runs again per batch)."""

    fn: Callable
    needs_hidden: bool = False

    def __call__(self, inputs: LossInputs):
        return self.fn(inputs)


# The registry, by name: soft (KL to the teacher's tempered distribution), hard (CE with gold labels),
# hidden (TinyBERT's hidden-state MSE through learned projections).
LOSSES: dict[str, Loss] = {"soft": Loss(soft_kl), "hard": Loss(hard_ce), "hidden": Loss(hidden_mse, needs_hidden=True)}


def layer_map(student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """TinyBERT's uniform mapping over hidden-state indices: embeddings to embeddings, layer i to i*T/S."""
    step = teacher_layers / student_layers
    return [(0, 0)] + [(i, round(i * step)) for i in range(1, student_layers + 1)]


# --- building the student ---------------------------------------------------------------------

def _vocabulary(folder: Path):
    """What decides a folder's ids: its vocab.txt as a mapping, or its own tokenizer.json's text."""
    from senti.core.json_tokenizer import is_json_tokenizer_folder, read_definition

    return read_definition(folder) if is_json_tokenizer_folder(folder) else read_vocab(folder / layout.VOCAB)


def build_student(spec: str, teacher, teacher_dir: Path, labels: list[str], max_seq_len: int,
                  init_from_teacher: bool, trust_pickle: bool = False, ngram_buckets: int | None = None):
    """(student, description): a preset shape with the teacher's vocabulary, a checkpoint or a PaddleNLP name;
    a new student (preset or pretrained folder) gets the n-gram head when `ngram_buckets` (None: as the teacher)."""
    from paddlenlp.transformers import AutoModelForSequenceClassification

    t_cfg = teacher.config
    if ngram_buckets is None:
        ngram_buckets = int(getattr(t_cfg, "ngram_buckets", 0) or 0)
    if spec in STUDENT_PRESETS:
        shape = STUDENT_PRESETS[spec]
        # the teacher's padding id: the vocabulary is the teacher's (a preset's 0 is `<s>` in an XLM-R vocabulary,
        # and a student padding with it masked every text's first token and answered differently once served)
        student = classifier_class(ngram_buckets)(ernie_config(shape, t_cfg.vocab_size, labels, max_seq_len,
                                                               ngram_buckets, int(t_cfg.pad_token_id or 0)))
        source = ModelSource("preset", preset=spec, shape=shape, ngram_buckets=ngram_buckets)
    elif Path(spec).expanduser().is_dir() and not is_checkpoint(Path(spec).expanduser()):
        path = Path(spec).expanduser()
        readable, _keep, note = readable_folder(path)  # a Hugging Face folder converted first
        student, _, report = pretrained_folder(readable, classifier_class(ngram_buckets), trust_pickle and _keep is None,
                                               labels, ngram_buckets)
        source = ModelSource("pretrained", path=str(path.resolve()), loaded=report + note, ngram_buckets=ngram_buckets)
        if _vocabulary(readable) != _vocabulary(teacher_dir):
            raise SentiError(f"student {spec} has a different vocabulary from the teacher's; "
                             "a student must share the teacher's vocab.txt (fine-tune the teacher from the same "
                             "pretrained folder)")
    else:
        path = Path(spec).expanduser()
        safe = check_weights_format(path, trust_pickle) if path.is_dir() else None
        try:
            student = AutoModelForSequenceClassification.from_pretrained(
                str(path) if path.is_dir() else spec, num_labels=len(labels), use_safetensors=safe,
                id2label=dict(enumerate(labels)), label2id={lab: i for i, lab in enumerate(labels)})
        except Exception as err:  # PaddleNLP raises assorted types when a name cannot be fetched
            raise SentiError(f"could not load student '{spec}' ({type(err).__name__}); use a preset "
                             f"({', '.join(STUDENT_PRESETS)}) or a local checkpoint") from None
        source = ModelSource("checkpoint" if path.is_dir() else "paddlenlp", name=spec)
        if path.is_dir() and _vocabulary(path) != _vocabulary(teacher_dir):
            raise SentiError(f"student {spec} has a different vocabulary from the teacher's; "
                             "a student must share the teacher's vocab.txt")
    s_cfg = student.config
    if s_cfg.vocab_size != t_cfg.vocab_size:
        raise SentiError(f"student vocabulary ({s_cfg.vocab_size}) differs from the teacher's ({t_cfg.vocab_size})")
    if init_from_teacher:
        if s_cfg.hidden_size > t_cfg.hidden_size or s_cfg.num_hidden_layers > t_cfg.num_hidden_layers:
            raise SentiError(f"--init-from-teacher needs a student no wider or deeper than the teacher "
                             f"(student {s_cfg.num_hidden_layers}x{s_cfg.hidden_size}, "
                             f"teacher {t_cfg.num_hidden_layers}x{t_cfg.hidden_size})")
        if (s_cfg.hidden_size, s_cfg.intermediate_size, s_cfg.num_attention_heads) != (
                t_cfg.hidden_size, t_cfg.intermediate_size, t_cfg.num_attention_heads):
            raise SentiError("--init-from-teacher needs the teacher's width (hidden, feed-forward and heads); "
                             f"student has hidden {s_cfg.hidden_size}, teacher {t_cfg.hidden_size}")
        source.init_layers = _copy_teacher_layers(student, teacher)
    return student, source


def _copy_teacher_layers(student, teacher) -> list[int]:
    """Embeddings, pooler, classifier (and the n-gram head, when both have one) and evenly spaced encoder layers
    from the teacher."""
    mapping = [t for s, t in layer_map(student.config.num_hidden_layers, teacher.config.num_hidden_layers)[1:]]
    state_t = teacher.state_dict()
    new_state = {}
    for name, _value in student.state_dict().items():
        source = name
        if ".encoder.layers." in name:
            prefix, rest = name.split(".encoder.layers.", 1)
            index, tail = rest.split(".", 1)
            source = f"{prefix}.encoder.layers.{mapping[int(index)] - 1}.{tail}"
        new_state[name] = state_t[source]
    student.set_state_dict(new_state)
    if hasattr(student, "ngram_table") and hasattr(teacher, "ngram_table"):  # the head came too: weigh it alike
        student.config.ngram_weight = teacher.config.ngram_weight
    return [t - 1 for t in mapping]


class DistillRun(ClassifierRun[DistillConfig]):
    """`senti distill`: the teacher's logits computed once (mixed with the n-gram baseline when asked), the student
    built beside it, and the chosen loss terms on each side of the student."""

    def prepare(self) -> None:
        import paddle

        from senti.core.checkpoint import load_checkpoint

        config, say = self.config, self.say
        teacher, tokenizer, t_meta = load_checkpoint(Path(config.teacher), config.trust_pickle)
        labels = t_meta.labels
        max_len = length_to_use(config.max_seq_len, t_meta.max_seq_len)
        self.weights = config.weights()
        unknown = sorted(set(self.weights) - set(LOSSES))
        if unknown:
            raise SentiError(f"unknown distillation loss {', '.join(unknown)}; choose from {', '.join(LOSSES)}")
        self.use_hidden = any(LOSSES[name].needs_hidden for name in self.weights)
        recipe = SplitRecipe(dataset=recorded_dataset(config.dataset), seed=config.seed)
        splits = load_recipe(recipe)
        if set(splits.labels) != set(labels):
            raise SentiError(f"teacher labels {labels} differ from the dataset's {splits.labels}")
        paddle.seed(config.seed)
        buckets = 0 if config.ngram_buckets is None and self.use_hidden else config.ngram_buckets
        student, s_source = build_student(config.student, teacher, Path(config.teacher), labels, max_len,
                                          config.init_from_teacher, config.trust_pickle, buckets)
        extra, extra_stats = unlabeled_texts(config.extra_texts, config.max_extra_texts,
                                          {e.text for e in splits.dev + splits.test}, config.seed)
        rows = [e.text for e in splits.train] + extra
        self.train_ids, cut = encode_texts(tokenizer, rows, max_len)
        self.dev_ids, _ = encode_texts(tokenizer, [e.text for e in splits.dev], max_len)
        self.gold = np.array([labels.index(e.label) for e in splits.train] + [-1] * len(extra), dtype=np.int64)
        self.dev_y = np.array([labels.index(e.label) for e in splits.dev], dtype=np.int64)
        # what the student learns from includes what its teacher (and a checkpoint it starts from) learned from
        self.train_hashes = training_hashes(rows, config.teacher, config.student)
        say(f"teacher logits for {len(rows)} texts ({len(extra)} extra, teacher-labelled), computed once")
        self.teacher_logits = predict_logits(teacher, self.train_ids, batch_size=64)
        dev_logits = predict_logits(teacher, self.dev_ids)
        self.mix = _ngram_mixer(config.teacher_ngram, splits, labels, config.seed, say) if config.teacher_ngram \
            else None
        if self.mix:
            self.teacher_logits = self.mix(rows, self.teacher_logits)
            dev_logits = self.mix([e.text for e in splits.dev], dev_logits)
        self.teacher_dev = classification_metrics(self.dev_y, dev_logits.argmax(1), labels)
        self.precision = resolve_precision(config, self.device, say)
        self.projections, self.layers = [], []
        if self.use_hidden:
            self.layers = layer_map(student.config.num_hidden_layers, teacher.config.num_hidden_layers)
            width_s, width_t = student.config.hidden_size, teacher.config.hidden_size
            self.projections = [paddle.nn.Linear(width_s, width_t) if width_s != width_t else paddle.nn.Identity()
                                for _ in self.layers]
        self.extra_parameters = [(f"projection_{i}.{n}", p) for i, proj in enumerate(self.projections)
                                 for n, p in proj.named_parameters()]
        self.model, self.teacher, self.tokenizer, self.labels = student, teacher, tokenizer, labels
        self.splits, self.max_len, self.extra_stats = splits, max_len, extra_stats
        self.meta = checkpoint_meta("senti distill", labels, max_len, tokenizer, s_source, versions(), recipe)
        self.metrics = TrainingMetrics(
            written_by="senti distill", model=s_source, device=self.device, world_size=self.world,
            precision=self.precision, amp_requested=config.amp, versions=versions(), runtime=self.runtime,
            data=DataStats.from_json({**splits.stats(), "extra_texts": extra_stats, "truncated_texts": {"train": cut}}))
        teacher.eval()

    def loss(self, index) -> Step:
        import paddle

        input_ids, token_type_ids = (paddle.to_tensor(a) for a in pad_batch(self.train_ids, index, self.pad_id))
        hidden_s = hidden_t = None
        if self.use_hidden:
            logits_s, hidden_s = logits_and_hidden(self.model, input_ids, token_type_ids, True)
            sides = {"": logits_s}
            with paddle.no_grad():  # teacher states per batch: caching every layer would not fit in memory
                _, hidden_t = logits_and_hidden(self.teacher, input_ids, token_type_ids, True)
        else:  # a two-sided student: ERNIE and the n-gram head each learn every term on their own
            sides = self.sides(input_ids, token_type_ids)
        values = {}
        for suffix, side in sides.items():
            batch = LossInputs(side.astype("float32"), paddle.to_tensor(self.teacher_logits[index]),
                               paddle.to_tensor(self.gold[index]), self.config.temperature, hidden_s, hidden_t,
                               self.projections, self.layers, input_ids != self.tokenizer.pad_token_id)
            values.update({name + suffix: (self.weights[name], LOSSES[name](batch)) for name in self.weights})
        loss = sum(weight * value for weight, value in values.values())
        return Step(loss, {name: float(value) for name, (_, value) in values.items()}, self.tokens(index))


def run_distillation(config: DistillConfig, say=print, progress=None) -> DistillReport | None:
    """Distill per `config`; writes an ordinary checkpoint plus distill.json; returns the report (None on a worker
    other than rank 0, which writes it)."""
    run = DistillRun(config, lambda: default_lr(config.student, from_scratch=config.student in STUDENT_PRESETS),
                     say, progress)
    run.run()
    if not run.main:  # rank 0 alone has the checkpoint (and writes the report)
        return None
    if config.calibrate:
        calibrate_checkpoint(run.out, say, config.trust_pickle)
    report = _report(run)
    report.write(run.out)
    return report


def _ngram_mixer(weight: float, splits, labels, seed: int, say):
    """`mix(texts, logits)`: the teacher's logits as log of (1 - weight) x the checkpoint's probabilities + weight x
    the char n-gram baseline's (fitted on the training split): an ensemble of two different views of the text, or
    the n-gram model alone at weight 1."""
    from senti.core.scores import softmax
    from senti.toolkit.evaluation.baseline import baseline_probabilities, fit_baseline

    pipeline = fit_baseline([e.text for e in splits.train], [e.label for e in splits.train], labels, seed)

    def mixed(texts, logits):
        probs = (1 - weight) * softmax(logits) + weight * baseline_probabilities(pipeline, texts, len(labels))
        return np.log(np.clip(probs, 1e-7, None)).astype(np.float32)

    say(f"teacher: {1 - weight:g} x the checkpoint + {weight:g} x the char n-gram baseline")
    return mixed


def _size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file()) / 2**20


def _report(run: DistillRun) -> DistillReport:
    """Teacher against the student checkpoint that was kept: sizes, dev figures, and test figures when the data
    has a test split."""
    from senti.core.checkpoint import load_checkpoint

    config, out, teacher, teacher_dev, splits = run.config, run.out, run.teacher, run.teacher_dev, run.splits
    tokenizer, max_len, labels, extra_stats, mix = run.tokenizer, run.max_len, run.labels, run.extra_stats, run.mix

    best, _, _ = load_checkpoint(out)  # score the checkpoint that was kept, not the last step
    kept = run.metrics.best
    assert kept is not None  # a finished run kept a checkpoint
    report = DistillReport(
        settings=json.loads(json.dumps(config.to_json())),  # plain JSON types, as the file will hold
        teacher=DistillSide(dev_accuracy=teacher_dev["accuracy"], dev_macro_f1=teacher_dev["macro_f1"],
                            parameters=int(sum(p.numel() for p in teacher.parameters())),
                            size_mb=_size_mb(Path(config.teacher)), path=str(Path(config.teacher).resolve())),
        student=DistillSide(dev_accuracy=kept.dev_accuracy, dev_macro_f1=kept.dev_macro_f1,
                            parameters=int(sum(p.numel() for p in best.parameters())), size_mb=_size_mb(out),
                            model=run.metrics.model,
                            kept_of_teacher_accuracy=kept.dev_accuracy / max(teacher_dev["accuracy"], 1e-9)),
        extra_texts=ExtraTexts.from_json(extra_stats) if extra_stats else None)
    if splits.test:
        test_ids, _ = encode_texts(tokenizer, [e.text for e in splits.test], max_len)
        test_y = np.array([labels.index(e.label) for e in splits.test])
        test_texts = [e.text for e in splits.test]
        for name, model in (("teacher", teacher), ("student", best)):
            logits = predict_logits(model, test_ids)
            if name == "teacher" and mix:  # the teacher the student learned from: the mixture
                logits = mix(test_texts, logits)
            result = classification_metrics(test_y, logits.argmax(1), labels)
            side = report.teacher if name == "teacher" else report.student
            side.test_accuracy, side.test_macro_f1 = result["accuracy"], result["macro_f1"]
    return report
