"""`senti predict`: score texts with an exported model, in this process or on Ray."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from senti.cli.common import (
    byte_progress,
    choices,
    console,
    err_console,
    fail,
    quiet_warnings,
    sigterm_unwinds,
    step_progress,
    user_errors,
)
from senti.cli.predict_output import print_counts, print_table
from senti.core.rows import INPUT_SUFFIXES
from senti.serving.backends import BACKENDS
from senti.serving.predictor import LONG_TEXT_MODES
from senti.serving.streaming import ENGINES, STDIO

app = typer.Typer()
if TYPE_CHECKING:  # Enums made at run time from the library's names; Any to a type checker
    Backend = Any
    LongText = Any
    Engine = Any
    InputFormat = Any
else:
    Backend = choices("Backend", ("auto", *BACKENDS))
    LongText = choices("LongText", LONG_TEXT_MODES)
    Engine = choices("Engine", ENGINES)
    InputFormat = choices("InputFormat", tuple(suffix.lstrip(".") for suffix in INPUT_SUFFIXES))


@app.command()
def predict(
    model: Annotated[Path, typer.Option(help="Export folder written by senti export.")],
    texts: Annotated[Optional[list[str]], typer.Argument(help="Texts to score (or use --input).")] = None,
    input: Annotated[Optional[str], typer.Option(
        help="File to score: .txt (a text a line), .tsv, .csv, .jsonl, or - for standard input; with --engine ray "
             "also .parquet, a folder or a glob.")] = None,
    output: Annotated[Optional[str], typer.Option(
        help="Where to write predictions: .jsonl, .tsv or .csv, or - for JSONL on standard output.")] = None,
    input_format: Annotated[Optional[InputFormat], typer.Option(
        help="Read the input as this format whatever its name (standard input: txt unless told).")] = None,
    backend: Annotated[Backend, typer.Option(help="Runtime and format.")] = Backend.auto,
    device: Annotated[str, typer.Option(help="cpu or gpu.")] = "cpu",
    batch_size: Annotated[int, typer.Option(help="Texts per model call.", min=1)] = 32,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).", min=1)] = None,
    long_text: Annotated[LongText, typer.Option(help="Texts over max_seq_len: cut, or average windows.")] =
        LongText.truncate,
    max_windows_per_text: Annotated[int, typer.Option(help="Most windows one text may take with --long-text "
                                                           "window (else an error row).", min=1)] = 64,
    text_column: Annotated[Optional[str], typer.Option(help="Text column of a .tsv/.csv/.jsonl input.")] = None,
    engine: Annotated[Engine, typer.Option(help="local: stream on this machine; ray: Ray Data.")] = Engine.local,
    address: Annotated[Optional[str], typer.Option(help="Ray cluster (auto, ray://HOST:PORT); default: a local "
                                                        "Ray on this machine's cores.")] = None,
    actors: Annotated[Optional[int], typer.Option(help="Ray actors, each with its own Predictor; default: as "
                                                       "senti serve lays out workers, by the model's width.",
                                                  min=1)] = None,
    threads_per_actor: Annotated[Optional[int], typer.Option(help="Threads per Ray actor.", min=1)] = None,
    aspects_file: Annotated[Optional[Path], typer.Option(
        "--aspects", help="With --engine ray: an aspect list (as senti aspects takes it); each aspect's answer and "
                          "score become columns aspect_NAME and aspect_NAME_score.", exists=True, dir_okay=False)] = None,
    id_column: Annotated[Optional[str], typer.Option(help="Input column carried to the output as `id` (a row without "
                                                          "one: an error row); Ray's default: the position.")] = None,
    unsure_output: Annotated[Optional[str], typer.Option(
        help="Also write the rows answered below the export's abstention threshold (senti export --abstain) to "
             "this .jsonl, with the model's guess: the label queue senti label and senti select read.")] = None,
):
    """Score texts with an exported model: a table for a few texts, a streamed file for many."""
    quiet_warnings()
    if engine.value == "ray":
        if unsure_output is not None:
            raise fail("--unsure-output is for --engine local; with --engine ray the output's `unsure` column marks "
                       "the same rows")
        return _predict_ray(model, input, output, aspects_file, dict(
            address=address, actors=actors, threads_per_actor=threads_per_actor, batch_size=batch_size,
            text_column=text_column or "text", id_column=id_column, backend=backend.value))
    if aspects_file is not None:
        raise fail("--aspects writes aspect columns with --engine ray; on this machine, senti aspects answers them")
    if unsure_output is not None and not (input and output):
        raise fail("--unsure-output goes with --input and --output (a file of texts to score)")
    if bool(texts) == bool(input):
        raise fail("give texts as arguments or one --input file (not both, not neither)")
    if input and not output:
        raise fail("--input needs --output (a .jsonl, .tsv or .csv file)")
    if input and input != STDIO and not Path(input).is_file():
        raise fail(f"--input {input}: no such file")
    say_to = err_console if output == STDIO else console  # standard output carries only the predictions
    from senti.serving import Predictor
    from senti.serving.streaming import check_output

    with user_errors(), sigterm_unwinds():
        if input and output:
            check_output(Path(input), output)  # before the model loads: nothing is scored for nothing
        predictor = Predictor.load(model, backend=backend.value, device=device, threads=threads,
                                   long_text=long_text.value, max_windows=max_windows_per_text)
        if texts:
            results = predictor.predict(texts, batch_size=batch_size)
        elif input and output:
            counts = _predict_file(predictor, input, output, batch_size, (text_column, id_column, unsure_output),
                                   input_format and f".{input_format.value}", say_to)
    if texts:
        return print_table(predictor, texts, results)
    print_counts(predictor, counts, (output, unsure_output), say_to)


def _predict_ray(model, source, dest, aspects_file: Path | None, settings: dict):
    """`settings`: RayJob's fields as the options gave them."""
    if source is None or dest is None:
        raise fail("--engine ray needs --input (file, folder or glob) and --output (.parquet or .jsonl)")
    from senti.serving.ray_predict import RayJob, predict_with_ray, quiet_ray_data

    with user_errors():
        listed = _aspect_list(aspects_file)

    quiet_ray_data()
    try:  # Ray resets the warning filters for its own categories when it loads: quiet them after that
        import ray.data  # noqa: F401
    except ImportError:
        pass  # predict_with_ray says how to install it
    quiet_warnings()

    terminal = err_console.is_terminal
    with user_errors(), step_progress(on=err_console) as bar:
        task = bar.add_task("scored and written", total=None) if terminal else None

        def progress(rows: int, total: int) -> None:  # a bar on a terminal, a line every 30 s in a log
            if task is None:
                err_console.print(f"{rows:,} of {total:,} rows scored and written ({rows / max(total, 1):.0%})")
            else:
                bar.update(task, completed=rows, total=total)

        try:
            job = RayJob(**settings, aspects=listed)
            result = predict_with_ray(model, str(source), str(dest), job, progress=progress,
                                      progress_every_s=1.0 if terminal else 30.0)
        except KeyboardInterrupt:
            raise fail(f"interrupted: nothing written to {dest}", 130) from None
    if result["rows_out"] != result["rows_in"]:
        err_console.print(f"[yellow]{result['rows_out']} rows out for {result['rows_in']} rows in: check the "
                          "input's last lines and the error rows[/]")
    console.print(f"{result['rows_in']} rows in, {result['rows_out']} rows out ({result['errors']} error rows) "
                  f"-> {dest}; {result['actors']} actor(s) x {result['threads_per_actor']} thread(s) ({result['layout_why']}); "
                  f"Ray start-up {result['ray_startup_s']:.1f} s, total {result['total_s']:.1f} s")


def _predict_file(predictor, src: str, dst: str, batch_size: int, named: tuple, input_format, on) -> dict:
    """`named`: the text column, the id column and the unsure queue's file, as the options gave them."""
    from senti.serving.streaming import Columns, predict_file

    text_column, id_column, unsure_output = named
    columns = Columns(text_column, id_column, input_format)
    if src == STDIO:  # no size to show progress against; answers stream out as lines come in
        return predict_file(predictor, src, dst, batch_size=batch_size, columns=columns, unsure_output=unsure_output)
    with byte_progress("scoring", on) as progress:
        task = progress.add_task("scoring", total=Path(src).stat().st_size)
        return predict_file(predictor, Path(src), dst, batch_size=batch_size, columns=columns,
                            progress=lambda n: progress.advance(task, n), unsure_output=unsure_output)


def _aspect_list(path: Path | None) -> list | None:
    """The aspect file's entries, checked as senti aspects checks them (the actors parse them again)."""
    if path is None:
        return None
    from senti.core.aspects import read_aspects

    return [a.to_json() for a in read_aspects(path)]
