"""`senti label`: a local page for the surge loop's human step, labelling the picks of `senti select`."""

from __future__ import annotations

import os
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
    review: Annotated[Optional[str], typer.Option(help="senti audit's suspects.jsonl (instead of --input), each row "
                                                       "kept, relabelled or dropped (k, c or 1-9, d), for senti "
                                                       "train --reviewed; or `disagreements`: with --input and the "
                                                       "team's --output, the texts labelled differently, for a "
                                                       "third labeller to settle.")] = None,
    overlap: Annotated[float, typer.Option(help="A team: this share of the texts goes to two labellers (each "
                                                "gives a name), for the agreement figures.", min=0.0,
                                           max=1.0)] = 0.0,
    model: Annotated[Optional[Path], typer.Option(help="Export folder or checkpoint for the label names and the "
                                                       "guesses the picks do not carry.", exists=True,
                                                  file_okay=False)] = None,
    labels: Annotated[Optional[str], typer.Option(help="Label names, comma-separated (default: the model's).")] = None,
    text_column: Annotated[Optional[str], typer.Option(help="Text column of a .tsv/.csv/.jsonl input.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean to expose it.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.", min=0, max=65535)] = 8600,
    api_key_env: Annotated[Optional[str], typer.Option(
        help="Name of an environment variable holding a key the browser must give (Basic auth password; default: "
             "SENTI_LABEL_TOKEN when set). Needed to listen beyond loopback.")] = None,
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
    api_key = api_key_from(api_key_env or ("SENTI_LABEL_TOKEN" if os.environ.get("SENTI_LABEL_TOKEN") else None))
    settling = review == "disagreements"
    if (input is None) == (review is None or settling):
        raise fail("give --input (texts to label, or with --review disagreements the team's texts) or --review "
                   "SUSPECTS.jsonl (senti audit's suspects)")
    from senti.serving.http_guard import HostGuard, allowed_hosts

    if allowed_hosts(host) is None and not api_key:
        raise fail(f"--host {host} is beyond loopback: every text and every label would be open to the network; "
                   "give a key the browsers must send (SENTI_LABEL_TOKEN=... or --api-key-env NAME)")
    with user_errors():
        job = _open_job(input, output, review, (model, labels, text_column, trust_pickle, aspects, unit.value),
                        overlap)
    import uvicorn

    from senti.toolkit.surge.label_server import create_label_app

    if job.repaired:
        console.print(f"{output}: cut a half-written last line ({job.repaired} bytes): the answer in flight when "
                      "the server stopped")
    labelled_as = f"{len(job.aspects)} aspects" if job.aspects is not None else ", ".join(job.labels)
    doing = "reviewing" if job.review else "settling" if job.settling else "labelling"
    done, total = job.progress()
    team = f"; {len(job.twice)} of them for two labellers" if job.twice else ""
    console.print(f"{doing} {total} texts ({done} answered{team}) as {labelled_as} -> {output}; "
                  f"open http://{host}:{port}/ (Ctrl+C stops; every answer is already saved)")
    uvicorn.run(HostGuard(create_label_app(job, api_key), host), host=host, port=port, log_level="warning",
                access_log=False)


def _open_job(input: Path | None, output: Path, review: str | None, options: tuple, overlap: float):
    """The labelling job the options name: a review of suspects, a team's texts (an overlap), or settling."""
    from senti.toolkit.surge.labeling import open_job, open_review

    if review is not None and review != "disagreements":
        return open_review(Path(review), output, options[1])
    assert input is not None  # the command checked it
    job = open_job(input, output, *options)
    job.plan(overlap, review == "disagreements")
    return job
