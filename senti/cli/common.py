"""What every command shares: the consoles, one-line errors with exit codes, choices, progress columns."""

from __future__ import annotations

import os
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from senti.core.errors import SentiError
from senti.serving.aspects import UNITS

console = Console(soft_wrap=True)  # progress lines stay whole in logs
err_console = Console(stderr=True, soft_wrap=True)  # one-line errors, never wrapped


TRUST_PICKLE_HELP = ("Load a checkpoint whose weights are a pickle (.pdparams): loading a pickle can run any code "
                     "in it, so only for files you trust. senti writes safetensors.")


def choices(name: str, values) -> Any:
    """A Typer choice type over the library's own tuple of names, so the CLI never keeps a copy (an Enum made at
    run time: `Any` to type checkers, which cannot see its members)."""
    return Enum(name, {v.replace("-", "_"): v for v in values}, type=str)


if TYPE_CHECKING:
    Unit = Any
else:
    Unit = choices("Unit", UNITS)  # what an aspect is found in: senti aspects, select, label and aspect-units


Nnodes = Annotated[Optional[int], typer.Option(
    help="Machines in the run; every node runs the same command (default: PADDLE_NNODES, else 1).", min=1)]
NodeRank = Annotated[Optional[int], typer.Option(
    help="This node's number, 0 to nnodes-1; node 0 hosts --master and writes the output (default: PADDLE_RANK).")]
Master = Annotated[Optional[str], typer.Option(help="HOST:PORT on node 0 where the nodes meet, the same on every "
                                                    "node (default: PADDLE_MASTER).")]
Reviewed = Annotated[Optional[Path], typer.Option(
    help="A review of senti audit's suspects (senti label --review): dropped rows left out, relabelled rows trained "
         "with the reviewer's label.", exists=True, dir_okay=False)]
JoinTimeout = Annotated[float, typer.Option(help="Seconds to wait for every node to join before giving up.", min=1)]


def parallel_plan(devices: str | None, nnodes: int | None, node_rank: int | None, master: str | None,
                  join_timeout: float):
    """(device ids, Cluster) when the run goes through paddle.distributed.launch (several devices on this node,
    or several nodes), else ([], None)."""
    from senti.toolkit.cluster.launch import Cluster

    device_ids = [d.strip() for d in devices.split(",") if d.strip()] if devices else []
    cluster = Cluster.from_options(nnodes, node_rank, master, join_timeout)
    return device_ids, cluster if (len(device_ids) > 1 or cluster.several) else None


def run_data_parallel(config, device_ids: list[str], cluster):
    """Launch `config` (training, distillation or pretraining) on this node's workers through
    paddle.distributed.launch and read back the metrics rank 0 wrote (TrainingMetrics or PretrainMetrics; None on
    the other nodes, which keep none)."""
    from pathlib import Path

    from senti.core.runtime import configure_runtime
    from senti.toolkit.cluster.launch import launch_training
    from senti.toolkit.training.run import launcher_device

    configure_runtime(config.threads)  # the workers inherit the thread settings from the start
    config.device = launcher_device(config.device)
    where = f", node {cluster.node_rank} of {cluster.nnodes} (master {cluster.master})" if cluster.several else ""
    console.print(f"data-parallel {config.KIND} on {max(1, len(device_ids))} {config.device} worker(s){where}")
    if cluster.several and cluster.node_rank == 0 and not cluster.on_loopback:
        console.print(f"the meeting point {cluster.master} listens on {cluster.host} for the whole run, open to that "
                      "network without authentication: keep it on a private network or behind a firewall")
    log_dir = launch_training(config, device_ids, cluster, say=say)
    if cluster.node_rank != 0:
        console.print(f"node {cluster.node_rank} done (logs in {log_dir}); node 0 wrote the output to "
                      f"{config.output_dir} on its machine")
        return None
    from senti.toolkit.records import PretrainMetrics, TrainingMetrics

    schema = PretrainMetrics if config.KIND == "pretraining" else TrainingMetrics
    return schema.read(Path(config.output_dir))


def say(message: str) -> None:
    """Progress lines from the library: printed as they are (their brackets are not rich markup)."""
    console.print(message, markup=False, highlight=False)


def shown(text: str) -> str:
    """A name from the user's data as a table cell: no rich markup, control characters as escapes (a group name
    in a file can hold terminal codes)."""
    from rich.markup import escape

    return escape("".join(c if c.isprintable() else repr(c)[1:-1] for c in text))


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print `error: message` on stderr and return the Exit to raise."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)  # "[scale]" is no markup
    return typer.Exit(code=code)


def api_key_from(env_name: str | None) -> str | None:
    """The API key in the environment variable the user named (a key on the command line shows in `ps`)."""
    if not env_name:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise fail(f"--api-key-env {env_name}: that environment variable is not set")
    return key


@contextmanager
def user_errors():
    """A SentiError inside becomes its one-line message and exit code (2, or the error's own `exit_code`)."""
    try:
        yield
    except SentiError as err:
        raise fail(str(err), getattr(err, "exit_code", 2)) from None


@contextmanager
def sigterm_unwinds():
    """SIGTERM stops the work at its next safe point (senti.core.stopping) and exits 143, after the
    staging folders and partial files are removed on the way out."""
    from senti.core import stopping

    with stopping.stop_at_checkpoints():
        try:
            yield
        except BaseException:
            signum = stopping.requested()
            if signum:
                raise SystemExit(128 + signum) from None
            raise
        stopping.checkpoint()


def step_progress(on=None):
    """A transient progress bar for counted steps (epochs, batches, rows) (on `on`, default the standard-output
    console)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=on or console, transient=True)


def byte_progress(label: str, on=None):
    """A transient progress bar over bytes of an input file (on `on`, default the standard-output console)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn(label), BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=on or console,
                    transient=True)


def quiet_warnings() -> None:
    """Libraries' Python warnings (deprecations inside Ray, PaddleNLP, ...) are for their developers, not for
    someone running a command: hidden unless --verbose. What matters to the user senti says itself."""
    import warnings

    from senti.core.runtime import verbose

    if not verbose():
        warnings.simplefilter("ignore")


def quiet(threads: int | None = None) -> None:
    """Set the runtime (threads, MKL, glog) before paddle loads, then hide the libraries' start-up chatter
    (imports paddlenlp: call inside a command)."""
    from senti.core.runtime import configure_runtime
    from senti.toolkit.logs import quiet_libraries

    configure_runtime(threads)
    quiet_warnings()
    quiet_libraries()
