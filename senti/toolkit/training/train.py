"""`senti train`: fine-tune an ERNIE classifier in Paddle's dynamic graph, one device or data-parallel."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from senti.core import layout
from senti.core.artifacts import SplitRecipe
from senti.core.batching import pad_batch
from senti.core.checkpoint import Lineage, ModelSource, read_meta
from senti.core.errors import SentiError
from senti.toolkit.data.batching import encode_texts
from senti.toolkit.data.seen import hashes_of, read_hashes, training_hashes
from senti.toolkit.data.splits import data_fingerprint, load_recipe, recorded_dataset
from senti.toolkit.evaluation.calibrate import calibrate_checkpoint
from senti.toolkit.records import BaselineFigures, DataStats, TrainingMetrics
from senti.toolkit.training.checkpoint import checkpoint_meta, versions
from senti.toolkit.training.config import TrainConfig
from senti.toolkit.training.models import build_model, default_lr, parent_meta
from senti.toolkit.training.run import SMALL_DEV, ClassifierRun, Step, balanced_weights, resolve_precision


class TrainRun(ClassifierRun[TrainConfig]):
    """`senti train`: the data (with replay), the model (a preset, a folder, a checkpoint or a hub name), one
    cross-entropy per side of the model."""

    anchor: list | None = None  # `--l2-sp`: (weight, the parent's copy) pairs
    pool_answers: tuple | list = ()  # `--unlabeled`: every pool text scored, as the parent answered it
    refit_table: np.ndarray | None = None  # `--ngram-init fit` on a checkpoint: the table set after the parent's record

    def prepare(self) -> None:
        """Data (with replay and the pool), model, encoded ids, hashes, the data said, then the records."""
        import paddle

        parent = parent_meta(self.config.model)
        max_len = self.settle_length(parent)
        config, say = self.config, self.say
        recipe = SplitRecipe(dataset=recorded_dataset(config.dataset), seed=config.seed, text_column=config.text_column,
                             label_column=config.label_column,
                             fingerprint=data_fingerprint(config.dataset, config.text_column, config.label_column),
                             labels=parent.labels if parent else None,
                             reviewed=str(Path(config.reviewed).resolve()) if config.reviewed else None)
        splits = load_recipe(recipe)
        if splits.reviewed is not None:
            say(splits.reviewed.said(config.reviewed))
        labels, replayed, lineage = continuation(config, splits, parent)
        for note in lineage.replay_notes if lineage else []:
            say(note)
        train_rows = splits.train + replayed
        paddle.seed(config.seed)
        model, tokenizer, source = build_model(config.model, labels, [e.text for e in train_rows], max_len,
                                               config.trust_pickle, config.ngram_buckets)
        self.parent_first = source.source == "checkpoint"
        self.interpolate = self.blend_setting(source, len(splits.dev))
        pseudo, pseudo_stats = self.pool_rows(model, tokenizer, splits, labels, max_len)
        learned = train_rows + pseudo
        train_cut, dev_cut = self.encode(tokenizer, learned, splits.dev, labels, max_len)
        self.ngram_side(model, source, labels)
        if config.ngram_init == "fit" and self.parent_first:
            self.refit_table = self.refit_ngram_table(model, tokenizer, splits, parent, max_len)
        if config.freeze_encoder:
            held = hold_encoder(model)
            say(f"--freeze-encoder: the encoder's {held:,} weights are held; the pooler, the head and the n-gram side "
                "train")
        self.anchor = self.parent_anchor(model)
        self.model, self.tokenizer, self.labels = model, tokenizer, labels
        self.old_dev = parent_dev(Path(config.model), recipe, tokenizer, labels, max_len) if self.parent_first else None
        self.train_hashes = training_hashes([e.text for e in learned], config.model)
        self.heldout_hashes = training_hashes([e.text for e in splits.dev + splits.test], config.model,
                                              name=layout.HELDOUT_TEXT_HASHES)
        data = {**splits.stats(), "replayed_rows": len(replayed), "unlabeled": pseudo_stats, "ngram_fit": self.ngram_fit,
                "truncated_texts": {"train": train_cut, "dev": dev_cut}, "max_seq_len": max_len,
                "pretraining_overlap": self.say_data(splits, (len(replayed), len(pseudo)), (train_cut, dev_cut), source)}
        self.open_metrics(splits, train_rows, source, DataStats.from_json(data))
        self.meta = checkpoint_meta("senti train", labels, max_len, tokenizer, source,
                                    self.metrics.versions, recipe, lineage)

    def open_records(self) -> None:
        """The records opened (the parent scored as it is first); then a refitted n-gram table replaces the parent's,
        its weight chosen on dev again (by log-loss on a small dev: the parent's weight was chosen for its own
        table)."""
        super().open_records()
        if self.refit_table is not None:
            from senti.toolkit.training.ngram_fit import hold_table

            hold_table(self.model, self.refit_table)
            self.held_ngram_weight = None
            self.weight_by_log_loss = len(self.dev_ids) < SMALL_DEV

    def parent_anchor(self, model) -> list | None:
        """`--l2-sp`: (weight, the parent's copy of it) for every trained weight, or None when off."""
        alpha = self.config.l2_sp
        if not alpha:
            return None
        if not self.parent_first:
            raise SentiError("--l2-sp pulls a continued model toward its parent: --model must be a senti checkpoint")
        pairs = [(p, p.detach().clone()) for p in model.parameters() if not p.stop_gradient]
        self.say(f"--l2-sp {alpha:g}: {alpha:g}/2 x the squared distance of {sum(int(p.size) for p, _ in pairs):,} "
                 "weights from the parent's is added to the loss")
        return pairs

    def blend_setting(self, source: ModelSource, dev_texts: int) -> str:
        """`--interpolate` for this run (toolkit.training.blend.for_parent), said when the default chose a blend."""
        from senti.toolkit.training.blend import FEW, for_parent

        config = self.config
        if config.interpolate not in ("off", FEW) and not self.parent_first:
            raise SentiError("--interpolate blends a parent with its child: --model must be a senti checkpoint")
        pretrained = self.parent_first and source.origin not in (None, "scratch")
        setting = for_parent(config.interpolate, pretrained, dev_texts < SMALL_DEV)
        if config.interpolate == FEW and setting != "off":
            self.say(f"the parent began from pretrained weights and the new dev has {dev_texts} texts: the blend parent "
                     f"+ {setting} x (child - parent) is tried at the end (--interpolate off: the child as trained)")
        return setting

    def say_data(self, splits, added: tuple[int, int], cut: tuple[int, int], source: ModelSource
                 ) -> dict[str, int] | None:
        """The data in a few lines (rows, what was cut, skipped and replayed, rare labels, what loading the model
        said; `added`: rows replayed and labelled by the parent, `cut`: train and dev texts truncated); returns how many
        dev and test texts the pretrained folder's corpus held, when it records them."""
        config, say = self.config, self.say
        replayed, pseudo = added
        replay_note = "".join([f" ({replayed} replayed from {config.replay})" if replayed else "",
                               f" ({pseudo} labelled by the parent from {config.unlabeled})" if pseudo else ""])
        say(f"data: {len(self.train_ids)} train{replay_note} / {len(self.dev_ids)} dev rows, labels {self.labels}; "
            f"truncated to {config.max_seq_len} tokens: {cut[0]} train, {cut[1]} dev; "
            f"empty texts skipped: {sum(splits.skipped_empty.values())}" + _repeats_note(splits.repeats_removed))
        for label, n in splits.rare_labels.items():
            say(f"warning: label '{label}' has only {n} training row(s); check the label column for typos")
        if source.loaded:
            say(f"{config.model}: {source.loaded}")
        overlap = pretraining_overlap(Path(config.model), splits) if self.main else None
        if overlap is not None:
            say(f"{config.model} was pretrained on {overlap['dev']} of the {len(splits.dev)} dev texts and "
                f"{overlap['test']} of the {len(splits.test)} test texts (their labels were never seen)")
        return overlap

    def open_metrics(self, splits, train_rows: list, source: ModelSource, data: DataStats) -> None:
        """The precision that will run and metrics.json's record, with the baseline fitted on the same rows."""
        config = self.config
        self.precision = resolve_precision(config, self.device, self.say)
        baseline = fit_baseline_figures(splits, train_rows, self.labels, config.seed, self.say) if (
            config.baseline and self.main) else None
        self.metrics = TrainingMetrics(
            written_by="senti train", model=source, device=self.device, world_size=self.world,
            precision=self.precision, amp_requested=config.amp, versions=versions(), runtime=self.runtime,
            data=data, baseline=BaselineFigures.from_json(baseline) if baseline else None)

    def encode(self, tokenizer, learned: list, dev: list, labels: list[str], max_len: int) -> tuple[int, int]:
        """Token and label ids of the rows learned from and of dev, the class weights when asked; (texts cut, in
        each)."""
        import paddle

        label_id = {lab: i for i, lab in enumerate(labels)}
        self.train_ids, train_cut = encode_texts(tokenizer, [e.text for e in learned], max_len)
        self.dev_ids, dev_cut = encode_texts(tokenizer, [e.text for e in dev], max_len)
        self.train_y = np.array([label_id[e.label] for e in learned], dtype=np.int64)
        # a tensor once, not one per step
        self.class_weight = paddle.to_tensor(balanced_weights(self.train_y, len(labels))) if (
            self.config.class_weights == "balanced") else None
        self.dev_y = np.array([label_id[e.label] for e in dev], dtype=np.int64)
        return train_cut, dev_cut

    def ngram_side(self, model, source: ModelSource, labels: list[str]) -> None:
        """The n-gram head's settings: the parent's weight held on a small new dev, the table fitted first
        (`--ngram-init fit`), the training counts the logit adjustment is chosen with."""
        config, say = self.config, self.say
        if self.parent_first and hasattr(model, "ngram_table") and len(self.dev_ids) < SMALL_DEV:
            self.held_ngram_weight = float(model.config.ngram_weight)  # the parent is scored at its own weight
            if config.ngram_init == "fit":
                say(f"the refitted n-gram side's weight is chosen by dev log-loss: {len(self.dev_ids)} dev texts "
                    f"are too few to choose it by accuracy (under {SMALL_DEV})")
            else:
                say(f"the parent's n-gram weight {self.held_ngram_weight:g} is kept: {len(self.dev_ids)} dev texts "
                    f"are too few to choose it again (under {SMALL_DEV})")
        self.ngram_fit = None
        if config.ngram_init == "fit" and not self.parent_first:
            if not hasattr(model, "ngram_table"):
                raise SentiError("--ngram-init fit fits the n-gram head of a model: give a preset or a pretrained "
                                 "folder with --ngram-buckets > 0")
            from senti.toolkit.training.ngram_fit import fit_ngram_table

            self.ngram_fit = fit_ngram_table(model, self.train_ids, self.train_y, self.dev_ids, self.dev_y, say)
        if adjusts(config.logit_adjustment, len(labels), hasattr(model, "ngram_table")):
            self.adjust_counts = np.bincount(self.train_y, minlength=len(labels))
        elif config.logit_adjustment == "auto" and len(labels) > 2:
            say(f"logit adjustment is off for these {len(labels)} labels: it needs the n-gram head "
                "(--ngram-buckets > 0)")

    def pool_rows(self, model, tokenizer, splits, labels: list[str], max_len: int) -> tuple[list, dict | None]:
        """`--unlabeled`: the parent's confident answers on the new domain's unlabelled texts (none of them a text
        of the new data's splits), as training rows."""
        config = self.config
        if not config.unlabeled:
            return [], None
        if not self.parent_first:
            raise SentiError("--unlabeled needs --model to be a senti checkpoint: the parent labels the pool")
        from senti.toolkit.data.unlabeled import unlabeled_texts
        from senti.toolkit.training.self_training import SCORED_PER_KEPT, pseudo_labelled

        known = {e.text.strip() for e in splits.train + splits.dev + splits.test}
        texts, read = unlabeled_texts(config.unlabeled, SCORED_PER_KEPT * config.unlabeled_max, known, config.seed,
                                      flag="--unlabeled")
        rows, kept, self.pool_answers = pseudo_labelled(model, tokenizer, texts, labels, max_len,
                                                        config.unlabeled_confidence, config.unlabeled_max)
        self.say(f"--unlabeled {config.unlabeled}: {kept['kept']} of {len(texts)} texts scored by the parent kept "
                 f"at confidence >= {config.unlabeled_confidence:g} ({read['read']} read)")
        return rows, {**read, **kept}

    def refit_ngram_table(self, model, tokenizer, splits, parent, max_len: int) -> np.ndarray:
        """`--ngram-init fit` on a checkpoint: the parent's table plus a change fitted on the old data's training
        rows, the new ones and the pool as the parent answered it (toolkit.training.ngram_fit); set once the parent
        has been scored as it is (`open_records`)."""
        from senti.toolkit.training.ngram_fit import changed_table

        config = self.config
        if not hasattr(model, "ngram_table"):
            raise SentiError(f"--ngram-init fit refits the n-gram head: {config.model} has none")
        if not config.replay:
            raise SentiError("--ngram-init fit on a checkpoint refits its n-gram head on the old data too: give "
                             "--replay OLD_DATA")
        old, _ = old_training_rows(config, parent.data, parent.labels, as_trained=True)
        rows = old + splits.train + list(self.pool_answers)  # the pool never holds a text of the new splits
        label_id = {lab: i for i, lab in enumerate(parent.labels)}
        ids = encode_texts(tokenizer, [e.text for e in rows], max_len)[0]
        table, record = changed_table(model, ids, np.array([label_id[e.label] for e in rows]))
        counts = {"old_rows": len(old), "new_rows": len(splits.train), "pool_rows": len(self.pool_answers)}
        self.ngram_fit = {**record, **counts}
        self.say(f"n-gram side: the parent's table plus a change fitted on {len(old)} rows of {config.replay}, "
                 f"{len(splits.train)} new and {len(self.pool_answers)} pool texts as the parent answers them "
                 f"(C={record['C']:g}, {record['seconds']:.0f} s); it replaces the parent's once the parent is scored, "
                 "and is held")
        return table

    def loss(self, index) -> Step:
        import paddle
        import paddle.nn.functional as F

        input_ids, token_type_ids = (paddle.to_tensor(a) for a in pad_batch(self.train_ids, index, self.pad_id))
        gold = paddle.to_tensor(self.train_y[index])
        losses = {suffix: F.cross_entropy(logits.astype("float32"), gold, weight=self.class_weight)
                  for suffix, logits in self.sides(input_ids, token_type_ids).items()}
        if self.anchor:
            losses["_l2_sp"] = self.config.l2_sp / 2 * paddle.add_n([((p - start) ** 2).sum() for p, start in self.anchor])
        if len(losses) == 1:
            return Step(losses[""], None, self.tokens(index))
        return Step(sum(losses.values()), {"ernie" if not s else s.strip("_"): float(v) for s, v in losses.items()},
                    self.tokens(index))


def adjusts(setting: str, n_labels: int, has_ngram_head: bool) -> bool:
    """Whether the logit adjustment is chosen on dev: `dev`, or `auto` with more than two labels; the n-gram head's
    answer is what carries it (core.ngram_head)."""
    if setting == "dev" and not has_ngram_head:
        raise SentiError("--logit-adjustment dev needs the n-gram head (a model built with --ngram-buckets > 0)")
    return has_ngram_head and (setting == "dev" or (setting == "auto" and n_labels > 2))


def parent_dev(parent: Path, recipe: SplitRecipe, tokenizer, labels: list[str], max_len: int):
    """The parent's own dev split (encoded ids, label ids), when its data can be read and is not the new data."""
    old = read_meta(parent).data
    if old is None or (old.fingerprint and old.fingerprint == recipe.fingerprint):
        return None
    try:
        rows = load_recipe(old).dev
    except SentiError:
        return None
    label_id = {lab: i for i, lab in enumerate(labels)}
    rows = [e for e in rows if e.label in label_id]
    return encode_texts(tokenizer, [e.text for e in rows], max_len)[0], np.array([label_id[e.label] for e in rows])


def run_training(config: TrainConfig, say=print, progress=None) -> TrainingMetrics:
    """Train per `config`, keep the best dev checkpoint in `config.output_dir`, return the metrics (as metrics.json
    holds them). With `config.aspects`, a head per aspect (toolkit.training.aspect_heads)."""
    if config.aspects:
        from senti.toolkit.training.aspect_heads import AspectRun

        run: ClassifierRun = AspectRun(config, lambda: default_lr(config.model), say, progress)
    else:
        run = TrainRun(config, lambda: default_lr(config.model), say, progress)
    metrics = run.run()
    if run.main and config.calibrate:
        calibrate_checkpoint(run.out, say, config.trust_pickle)
    return metrics


def hold_encoder(model) -> int:
    """The encoder's weights (ERNIE's embeddings and layers; not the pooler, which a converted folder may lack)
    held where they start; returns how many were held."""
    held = 0
    for name, parameter in model.named_parameters():
        if name.startswith("ernie.") and not name.startswith("ernie.pooler."):
            parameter.stop_gradient = True
            held += int(parameter.size)
    return held


def pretraining_overlap(folder: Path, splits) -> dict | None:
    """How many dev and test texts the pretrained folder's corpus held, or None when it records no texts."""
    seen = read_hashes(folder, layout.PRETRAIN_TEXT_HASHES)
    if seen is None:
        return None
    return {name: int(np.isin(hashes_of([e.text for e in rows]), seen).sum())
            for name, rows in (("dev", splits.dev), ("test", splits.test))}


def fit_baseline_figures(splits, train_rows, labels, seed: int, say) -> dict:
    """The char n-gram baseline on the very training rows, scored on dev; said in one line."""
    from senti.toolkit.evaluation.baseline import baseline_figures

    record = baseline_figures([e.text for e in train_rows], [e.label for e in train_rows], labels,
                              {"dev": ([e.text for e in splits.dev], [e.label for e in splits.dev])}, seed)
    say(f"baseline ({record['model']}, fitted in {record['fit_seconds']:.0f} s): dev accuracy "
        f"{record['dev']['accuracy']:.4f}, macro-F1 {record['dev']['macro_f1']:.4f}; --no-baseline skips it")
    return record


def continuation(config: TrainConfig, splits, meta) -> tuple[list[str], list, Lineage | None]:
    """(label set, replayed rows, lineage). Continuing from a checkpoint (`meta`, its metadata; None for any other
    start) keeps its labels (a label it does not know is an error naming it) and records the parent; `--replay`
    mixes a seeded sample of old training rows (`replay_ratio` x the new training rows) in, against forgetting."""
    import hashlib

    if meta is None:
        if config.replay:
            raise SentiError("--replay continues a checkpoint: --model must be a senti checkpoint folder")
        return splits.labels, [], None
    parent = Path(config.model).expanduser()
    labels = meta.labels
    new = sorted(set(splits.labels) - set(labels))
    if new:
        raise SentiError(f"{config.dataset}: label(s) {', '.join(new)} are not among the checkpoint's labels "
                         f"({', '.join(labels)}); a model continued from a checkpoint keeps its label set")
    replayed: list = []
    notes: list[str] = []
    held = sorted({e.label for e in splits.train})
    if len(held) < 2 and not config.replay:
        raise SentiError(f"{config.dataset}: the train split holds only '{held[0]}'; continuing a model on one label "
                         "needs --replay OLD_DATA, so that it still learns from the others")
    if config.replay:
        replayed, notes = _replay_rows(config, meta.data, splits, labels)
        if len(held) < 2:
            notes.append(f"the train split holds only '{held[0]}': the other labels are seen in the replayed rows")
    lineage = Lineage(parent=str(parent.resolve()),
                      parent_version=hashlib.sha256((parent / layout.CHECKPOINT_META).read_bytes()).hexdigest()[:12],
                      parent_data=meta.data, dataset=config.dataset, replay=config.replay,
                      replay_ratio=config.replay_ratio if config.replay else None, replayed_rows=len(replayed),
                      replay_notes=notes)
    return labels, replayed, lineage


def _replay_rows(config: TrainConfig, recipe, splits, labels) -> tuple[list, list[str]]:
    """A seeded sample of the old data's training rows (`old_training_rows`), and what the user should know."""
    import random

    pool, notes = old_training_rows(config, recipe, labels)
    if data_fingerprint(str(config.replay)) == data_fingerprint(config.dataset, config.text_column, config.label_column):
        notes.append(f"--replay {config.replay} is the new dataset itself: every replayed row is a second copy")
    want = round(config.replay_ratio * len(splits.train))
    if want == 0:
        notes.append(f"--replay-ratio {config.replay_ratio:g} x {len(splits.train)} new training rows replays no row")
    elif want > len(pool):
        notes.append(f"--replay-ratio {config.replay_ratio:g} asks for {want} rows; the old training rows are "
                     f"{len(pool)}, all replayed")
    return random.Random(config.seed).sample(pool, min(want, len(pool))), notes


def old_training_rows(config: TrainConfig, recipe, labels, as_trained: bool = False) -> tuple[list, list[str]]:
    """`--replay`'s training rows that may be learned from, and what the user should know about them. The parent's
    data is recognised by its rows' fingerprint (whatever the path) and cut as it was; any other data has every
    text of the parent's dev and test splits taken out, so no held-out row of the parent is trained on. With
    `as_trained`, the parent's own data gives its training split whole, as the parent learned it: a training text
    that is also a dev text (ChnSentiCorp has 338 of 1,200) was learned by the parent, and a model fitted without
    it reads the parent's dev lower for that alone."""
    replay = config.replay
    assert replay is not None  # called for --replay only
    fingerprint = data_fingerprint(replay)
    same = recipe is not None and (recipe.fingerprint == fingerprint if recipe.fingerprint else
                                   Path(recipe.dataset).expanduser().resolve() == Path(replay).expanduser().resolve())
    old = load_recipe(recipe) if same else load_recipe(SplitRecipe(dataset=replay, seed=config.seed))
    unknown = sorted(set(old.labels) - set(labels))
    if unknown:
        raise SentiError(f"--replay {config.replay}: label(s) {', '.join(unknown)} are not among the "
                         f"checkpoint's labels ({', '.join(labels)})")
    notes, pool = [], old.train
    if not same and recipe is not None:
        try:
            parent = load_recipe(recipe)
        except SentiError:
            parent = None
            notes.append(f"--replay {config.replay}: the parent's data ({recipe.dataset}) cannot be read, so its "
                         "dev and test rows cannot be kept out of the replay; replay the data it was trained on")
        if parent is not None:
            held = {e.text for e in parent.dev + parent.test}
            pool = [e for e in old.train if e.text not in held]
            if len(pool) < len(old.train):
                notes.append(f"--replay {config.replay}: {len(old.train) - len(pool)} rows left out, they are in the "
                             "parent's dev or test split")
    parent_heldout = read_hashes(Path(config.model).expanduser(), layout.HELDOUT_TEXT_HASHES)
    # by content: whatever the file looks like now (rows added change the cut)
    if parent_heldout is not None and not (same and as_trained):
        held_out = np.isin(hashes_of([e.text for e in pool]), parent_heldout)
        kept = [e for e, out in zip(pool, held_out) if not out]
        if len(kept) < len(pool):
            notes.append(f"--replay {config.replay}: {len(pool) - len(kept)} rows left out, the parent held them out "
                         "(dev or test)")
        pool = kept
    return pool, notes


def _repeats_note(removed: dict[str, int]) -> str:
    """What senti removed before it split the rows itself (splits.distinct_rows), or nothing."""
    if not any(removed.values()):
        return ""
    return (f"; {removed['repeats']} repeated texts kept once and {removed['two_labels']} rows of texts given two "
            "labels dropped before splitting, so no text is in two splits")
