"""`senti convert`: a Hugging Face BERT-family folder made into a checked PaddleNLP ERNIE folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from senti.cli.common import console, quiet, user_errors

app = typer.Typer()


@app.command()
def convert(
    model: Annotated[Path, typer.Argument(help="A Hugging Face folder (config.json with model_type bert, roberta "
                                               "or xlm-roberta; model.safetensors or pytorch_model.bin; "
                                               "tokenizer.json or vocab.txt).", exists=True, file_okay=False)],
    output_dir: Annotated[Path, typer.Option(help="PaddleNLP folder to write (model.safetensors, config.json, "
                                                  "vocab.txt, convert.json).")],
    overwrite: Annotated[bool, typer.Option(help="Replace a folder senti convert wrote before.")] = False,
):
    """Convert a Hugging Face encoder for senti train, pretrain and distill: weights read without running code,
    checked against a numpy forward pass of the original before anything is written."""
    with user_errors():
        from senti.core import layout
        from senti.core.errors import SentiError

        if output_dir.exists() and any(output_dir.iterdir()) and not (
                overwrite and (output_dir / layout.CONVERT_META).is_file()):
            raise SentiError(f"{output_dir} is not empty; choose a new folder (--overwrite replaces only a folder "
                             "senti convert wrote)")
        quiet(None)
        from senti.toolkit.training.convert import convert_folder

        meta = convert_folder(model, output_dir)
    console.print(f"converted {meta.model_type} ({meta.weights_file}, {meta.tensors} tensors) -> [bold]{output_dir}[/]; "
                  f"last hidden states within {meta.check.max_abs_diff:.1e} of the original's on "
                  f"{meta.check.tokens} tokens (numpy reference)")
    if meta.fresh:
        console.print(f"not in the original, left at their initial values: {', '.join(meta.fresh)}")
    if meta.left_out:
        console.print(f"left out (no place in ERNIE): {', '.join(meta.left_out)}")
