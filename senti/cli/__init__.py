"""The `senti` command line: above every stage, composing them. One small module per command group;
heavy imports (paddle, paddlenlp, onnxruntime) happen inside each command, so `senti --help` is quick."""

from __future__ import annotations

import os
import sys

import typer

from senti.cli import (
    aspects,
    audit,
    bench,
    convert,
    distill,
    evaluate,
    export,
    info,
    label,
    predict,
    pretrain,
    select,
    serve,
    train,
)

app = typer.Typer(
    help="senti: Chinese sentiment analysis on PaddlePaddle, from fine-tuning to production.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
for group in (convert, pretrain, train, distill, evaluate, audit, export, predict, aspects, select, label, serve, info):
    app.add_typer(group.app)
app.add_typer(bench.app, name="bench")


@app.callback()
def options(verbose: bool = typer.Option(False, "--verbose", help="Also show the libraries' own logs (Paddle's "
                                                                 "glog, PaddleNLP, Ray); or SENTI_VERBOSE=1.")):
    """senti: Chinese sentiment analysis on PaddlePaddle, from fine-tuning to production."""
    if verbose:
        os.environ["SENTI_VERBOSE"] = "1"


def main():
    from senti.core import stopping

    try:
        app()
    except SystemExit as done:
        signum = stopping.requested()
        if signum:  # stopped by a signal: skip native libraries' teardown, which may crash
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(done.code if isinstance(done.code, int) else 128 + signum)
        raise


__all__ = ["app", "main"]
