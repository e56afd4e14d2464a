"""`senti train --aspects ASPECTS.json`: a head per aspect over one shared encoder, learned from a team's aspect
labels.

The data is what `senti aspect-units` reads (toolkit.data.aspect_units): ASAP's CSV layout (one column per aspect,
coded 1 / 0 / -1 / -2), JSONL rows `{"text", "aspects": {name: polarity}}`, or `senti label --aspects` logs; a
folder keeps its train/dev/test files, one file is split by text. The model is the encoder of --model (a preset, a
pretrained folder, or a senti checkpoint, whose head is left behind) with one linear layer of 4 outputs per aspect
(ASPECT_POLARITIES; a checkpoint with heads for the same aspects keeps them, and is then the first checkpoint, which
the heads trained on must beat on dev); its labels are `head_labels(names)`, so the checkpoint and every export of it say what they
answer. Each (text, aspect) pair the data labels is one cross-entropy over its aspect's four outputs (unlabelled
pairs are left out); the checkpoint kept is the best on dev by 4-way macro-F1 (then accuracy), since answering
"not mentioned" everywhere already scores a high accuracy. Beside it, the figures of answering each aspect's most
frequent training class are reported: the heads must beat them to have learned anything.

Measured on ASAP's public samples (100 train reviews): the heads alone lose to the team's keywords with the sentence
model (docs/results/aspects.md); they are for teams with thousands of labelled texts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from senti.core.artifacts import SplitRecipe
from senti.core.aspects import ASPECT_POLARITIES, Aspect, head_labels, read_aspects
from senti.core.batching import pad_batch
from senti.core.checkpoint import EvalPoint, ModelSource
from senti.core.errors import DataError
from senti.core.scores import mean_log_loss
from senti.toolkit.data.aspect_units import UNLABELLED, AspectText, gold_matrix, split_texts
from senti.toolkit.data.batching import encode_texts
from senti.toolkit.data.seen import training_hashes
from senti.toolkit.evaluation.metrics import grouped, pair_figures
from senti.toolkit.records import DataStats, TrainingMetrics
from senti.toolkit.training.checkpoint import checkpoint_meta, versions
from senti.toolkit.training.config import TrainConfig
from senti.toolkit.training.models import build_model, parent_meta, pretrained_folder
from senti.toolkit.training.run import ClassifierRun, Step, balanced_weights, resolve_precision

CLASSES = len(ASPECT_POLARITIES)


def majority_answers(train_gold: np.ndarray, texts: int) -> np.ndarray:
    """Each aspect's most frequent labelled training class, answered for `texts` texts (the floor heads must beat)."""
    said = [np.bincount(col[col != UNLABELLED], minlength=CLASSES).argmax() for col in train_gold.T]
    return np.tile(np.asarray(said, dtype=np.int64), (texts, 1))


MIN_HEAD_PAIRS = 10  # labelled training pairs an aspect needs for a head of its own


class AspectRun(ClassifierRun[TrainConfig]):
    """See the module's docstring: `senti train` with the data, model, loss and dev figures of aspect heads."""

    choose_by_macro_f1 = True
    aspects: list[Aspect]
    train_gold: np.ndarray
    dev_gold: np.ndarray

    def prepare(self) -> None:
        """The aspect list and data, the model (the parent first when it has these heads), encoded ids, records."""
        import paddle

        config = self.config
        self.refuse_sentence_options()
        parts, labels = self.read_data()
        parent = parent_meta(config.model)
        max_len = self.settle_length(parent)
        paddle.seed(config.seed)
        model, tokenizer, source = self.start_model(labels, [t.text for t in parts["train"]], max_len, parent)
        self.parent_first = parent is not None and parent.labels == labels  # heads continued on new labels
        self.model, self.tokenizer, self.labels = model, tokenizer, labels
        self.train_ids, train_cut = encode_texts(tokenizer, [t.text for t in parts["train"]], max_len)
        self.dev_ids, dev_cut = encode_texts(tokenizer, [t.text for t in parts["dev"]], max_len)
        labelled = self.train_gold[self.train_gold != UNLABELLED]
        self.class_weight = paddle.to_tensor(balanced_weights(labelled, CLASSES)) if (
            config.class_weights == "balanced") else None
        self.train_hashes = training_hashes([t.text for t in parts["train"]], config.model)
        self.precision = resolve_precision(config, self.device, self.say)
        self.metrics = TrainingMetrics(
            written_by="senti train", model=source, device=self.device, world_size=self.world,
            precision=self.precision, amp_requested=config.amp, versions=versions(), runtime=self.runtime,
            data=self.data_stats(parts, labels, (train_cut, dev_cut), max_len))
        recipe = SplitRecipe(dataset=str(Path(config.dataset).expanduser().resolve()), seed=config.seed,
                             text_column=config.text_column, labels=labels)
        self.meta = checkpoint_meta("senti train", labels, max_len, tokenizer, source, self.metrics.versions, recipe)
        self.say_data(parts, (train_cut, dev_cut), source)

    def read_data(self) -> tuple[dict[str, list[AspectText]], list[str]]:
        """(the labelled texts of each split, the model's labels), each split's gold answers set; DataError when
        train or dev labels none of the listed aspects."""
        config = self.config
        assert config.aspects is not None
        self.aspects = read_aspects(Path(config.aspects))
        parts = split_texts(Path(config.dataset), self.aspects, config.text_column, config.seed)
        names = [a.name for a in self.aspects]
        self.train_gold, self.dev_gold = gold_matrix(parts["train"], names), gold_matrix(parts["dev"], names)
        for split, gold in (("train", self.train_gold), ("dev", self.dev_gold)):
            if not (gold != UNLABELLED).any():
                raise DataError(f"{config.dataset}: the {split} split labels none of the aspects of {config.aspects}")
        pairs = (self.train_gold != UNLABELLED).sum(0)
        few = {name: int(n) for name, n in zip(names, pairs) if n < MIN_HEAD_PAIRS}
        if few:  # a head learned from no label answered every text alike ("wifi: neutral" for food reviews)
            raise DataError(f"{config.aspects}: {', '.join(f'{n} ({k} labelled)' for n, k in few.items())} "
                            f"{'has' if len(few) == 1 else 'have'} fewer than {MIN_HEAD_PAIRS} labelled training "
                            "pairs, too few for a head; label them or take them out of the aspect list")
        return parts, head_labels(names)

    def refuse_sentence_options(self) -> None:
        """The options of a sentence model that aspect heads do not have, each refused by name."""
        config = self.config
        given = [flag for flag, on in (("--replay", config.replay), ("--unlabeled", config.unlabeled),
                                       ("--interpolate", config.interpolate not in ("off", "few")),
                                       ("--label-column", config.label_column), ("--l2-sp", config.l2_sp),
                                       ("--ngram-init fit", config.ngram_init == "fit")) if on]
        if given:
            raise DataError(f"--aspects trains aspect heads; {', '.join(given)} "
                            f"{'belongs' if len(given) == 1 else 'belong'} to a sentence model")

    def start_model(self, labels: list[str], train_texts: list[str], max_len: int, parent):
        """(model, tokenizer, source): the encoder of --model (`parent` its metadata when it is a checkpoint) with a
        fresh head per aspect, no n-gram head (its table answers one distribution per text)."""
        from senti.toolkit.training.models import classifier_class, weights_origin

        spec = Path(self.config.model).expanduser()
        if parent is not None:  # a sentence model's encoder; its head and n-gram table stay
            model, tokenizer, report = pretrained_folder(spec, classifier_class(0), self.config.trust_pickle, labels)
            return model, tokenizer, ModelSource("checkpoint", path=str(spec.resolve()),
                                                 origin=weights_origin(str(spec)), loaded=report)
        return build_model(self.config.model, labels, train_texts, max_len, self.config.trust_pickle, 0)

    def data_stats(self, parts: dict[str, list[AspectText]], labels: list[str], cut: tuple[int, int],
                   max_len: int) -> DataStats:
        """metrics.json's data record: texts per split, labelled pairs per polarity in each."""
        counts = {split: dict.fromkeys(ASPECT_POLARITIES, 0) for split in parts}
        for split, texts in parts.items():
            for t in texts:
                for polarity in t.polarity.values():
                    counts[split][polarity] += 1
        return DataStats(origin=str(self.config.dataset), labels=labels, rows={s: len(t) for s, t in parts.items()},
                         skipped_empty_texts={}, repeats_removed={}, label_counts=counts, rare_labels={},
                         truncated_texts={"train": cut[0], "dev": cut[1]}, max_seq_len=max_len)

    def say_data(self, parts: dict[str, list[AspectText]], cut: tuple[int, int], source: ModelSource) -> None:
        """The data, the model and the floor to beat, in a few lines."""
        names = [a.name for a in self.aspects]
        pairs = {s: int((g != UNLABELLED).sum()) for s, g in (("train", self.train_gold), ("dev", self.dev_gold))}
        self.say(f"data: {len(parts['train'])} train / {len(parts['dev'])} dev texts, {len(names)} aspects, "
                 f"{pairs['train']} / {pairs['dev']} labelled pairs; truncated to {self.config.max_seq_len} tokens: "
                 f"{cut[0]} train, {cut[1]} dev")
        unknown = sorted({n for t in parts["train"] + parts["dev"] for n in t.polarity} - set(names))
        if unknown:
            self.say(f"warning: the data labels aspects the list does not have, left out: {', '.join(unknown[:5])}")
        if source.loaded:
            self.say(f"{self.config.model}: {source.loaded}")
        floor = pair_figures(self.dev_gold, majority_answers(self.train_gold, len(self.dev_ids)))
        self.say(f"baseline (each aspect's most frequent training answer): dev accuracy {floor['accuracy']:.4f}, "
                 f"macro-F1 {floor['macro_f1']:.4f}, mention F1 {floor['mention_f1']:.4f}")

    def dev_answers(self) -> tuple[int, str]:
        return int((self.dev_gold != UNLABELLED).sum()), "labelled (text, aspect) pairs"

    def loss(self, index) -> Step:
        import paddle
        import paddle.nn.functional as F

        input_ids, token_type_ids = (paddle.to_tensor(a) for a in pad_batch(self.train_ids, index, self.pad_id))
        logits = self.sides(input_ids, token_type_ids)[""].astype("float32").reshape([-1, CLASSES])
        gold = paddle.to_tensor(self.train_gold[index].reshape(-1))
        loss = F.cross_entropy(logits, gold, weight=self.class_weight, ignore_index=UNLABELLED)
        return Step(loss, None, self.tokens(index))

    def evaluate(self, epoch: int, step: int) -> EvalPoint:
        """Dev figures over the labelled pairs: 4-way accuracy, macro-F1 and log-loss."""
        import time

        from senti.toolkit.evaluation.evaluate import predict_logits

        logits = grouped(predict_logits(self.model, self.dev_ids), len(self.aspects))
        figures = pair_figures(self.dev_gold, logits.argmax(-1))
        keep = self.dev_gold != UNLABELLED
        log_loss = mean_log_loss(logits[keep], self.dev_gold[keep]) if keep.any() else None
        return EvalPoint(epoch=epoch, step=step, dev_accuracy=figures["accuracy"], dev_macro_f1=figures["macro_f1"],
                         dev_log_loss=log_loss, seconds=round(time.perf_counter() - self.started, 1))
