"""`senti label`: a local page for the surge loop's human step, labelling the picks of `senti select`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from senti.cli.common import TRUST_PICKLE_HELP, Unit, api_key_from, console, fail, quiet_warnings, user_errors

app = typer.Typer()


@app.command()
def label(
    output: Annotated[Optional[Path], typer.Option(help="The labels (.jsonl), an audit log: one line per answer, "
                                                        "the last per id wins. Given again, the job resumes where "
                                                        "it stopped. With --agreement: the disagreements, to "
                                                        "settle with senti label --input.")] = None,
    input: Annotated[Optional[Path], typer.Option(help="The texts to label: what senti select wrote (.jsonl/.tsv/"
                                                       ".csv), or any file senti predict reads.", exists=True,
                                                  dir_okay=False)] = None,
    review: Annotated[Optional[Path], typer.Option(help="Instead of --input: senti audit's suspects.jsonl, each row "
                                                        "kept, relabelled or dropped (k, c or 1-9, d); senti train "
                                                        "--reviewed reads the decisions.", exists=True,
                                                   dir_okay=False)] = None,
    model: Annotated[Optional[Path], typer.Option(help="Export folder or checkpoint for the label names and the "
                                                       "guesses the picks do not carry.", exists=True,
                                                  file_okay=False)] = None,
    labels: Annotated[Optional[str], typer.Option(help="Label names, comma-separated (default: the model's).")] = None,
    text_column: Annotated[Optional[str], typer.Option(help="Text column of a .tsv/.csv/.jsonl input.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean to expose it.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.", min=0, max=65535)] = 8600,
    api_key_env: Annotated[Optional[str], typer.Option(
        help="Name of an environment variable holding a key the browser must give (Basic auth password).")] = None,
    trust_pickle: Annotated[bool, typer.Option(help=TRUST_PICKLE_HELP)] = False,
    aspects: Annotated[Optional[Path], typer.Option(help="A team's aspect list: label each aspect found in a text "
                                                         "(positive, neutral, negative, not mentioned), the evidence "
                                                         "highlighted; senti aspect-units reads the answers.",
                                                    exists=True, dir_okay=False)] = None,
    unit: Annotated[Unit, typer.Option(help="With --aspects: the unit an aspect is found in.")] = Unit.sentence,
    agreement: Annotated[Optional[list[Path]], typer.Option(
        help="Instead of a page: label logs (repeat the option for several) read for Cohen's kappa per pair of "
             "labellers and per label, the raw agreement and the disagreements.", exists=True,
        dir_okay=False)] = None,
):
    """Label texts one at a time in the browser: keys 1-9, a/x (accept/reject the guess), space, backspace."""
    quiet_warnings()
    if agreement:
        from senti.cli.label_agreement import report_agreement

        with user_errors():
            report_agreement(agreement, output)
        return
    if output is None:
        raise fail("give --output LABELS.jsonl: where every answer is kept")
    api_key = api_key_from(api_key_env)
    if (input is None) == (review is None):
        raise fail("give --input (texts to label) or --review (senti audit's suspects), one of them")
    with user_errors():
        from senti.toolkit.surge.labeling import open_job, open_review

        if review is not None:
            job = open_review(review, output, labels)
        else:
            assert input is not None  # one of the two, checked above
            job = open_job(input, output, model, labels, text_column, trust_pickle, aspects, unit.value)
    import uvicorn

    from senti.serving.http_guard import HostGuard, allowed_hosts
    from senti.toolkit.surge.label_server import create_label_app

    if job.repaired:
        console.print(f"{output}: cut a half-written last line ({job.repaired} bytes): the answer in flight when "
                      "the server stopped")
    if allowed_hosts(host) is None and not api_key:
        console.print(f"warning: listening on {host} without a key: anyone who reaches the port reads every text "
                      "and can post labels; give --api-key-env NAME")
    labelled_as = f"{len(job.aspects)} aspects" if job.aspects is not None else ", ".join(job.labels)
    doing = "reviewing" if job.review else "labelling"
    console.print(f"{doing} {len(job.picks)} texts ({job.done()} answered) as {labelled_as} -> {output}; "
                  f"open http://{host}:{port}/ (Ctrl+C stops; every answer is already saved)")
    uvicorn.run(HostGuard(create_label_app(job, api_key), host), host=host, port=port, log_level="warning",
                access_log=False)
