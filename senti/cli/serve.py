"""`senti serve`: the HTTP API over an export folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from senti.cli.common import api_key_from, console, fail, quiet_warnings, user_errors
from senti.cli.predict import Backend, LongText

app = typer.Typer()


@app.command()
def serve(
    model: Annotated[Path, typer.Option(help="Export folder written by senti export.")],
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean to expose it.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.", min=0, max=65535)] = 8000,
    backend: Annotated[Backend, typer.Option(help="Runtime and format.")] = Backend.auto,
    device: Annotated[str, typer.Option(help="cpu or gpu.")] = "cpu",
    threads: Annotated[Optional[int], typer.Option(help="CPU threads per worker (default: by the model's width, "
                                                        "see --workers).", min=1)] = None,
    max_batch_size: Annotated[int, typer.Option(help="Most texts per model call.", min=1)] = 32,
    max_wait_ms: Annotated[float, typer.Option(help="Longest wait for a batch to fill.", min=0)] = 5.0,
    max_queue: Annotated[int, typer.Option(help="Texts waiting before requests get 503.", min=1)] = 2048,
    max_texts: Annotated[int, typer.Option(help="Most texts in one request (else 413).", min=1)] = 256,
    max_windows: Annotated[int, typer.Option(help="Most model inputs in one request, counting each window of a "
                                                  "long text (else 413).", min=1)] = 512,
    max_windows_per_text: Annotated[int, typer.Option(help="Most windows one text may take with --long-text "
                                                           "window (else 413).", min=1)] = 64,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body (else 413).", min=1)] = 1 << 20,
    body_timeout_s: Annotated[float, typer.Option(help="Seconds a client has to send its body (else 408) and "
                                                       "its headers (else the connection closes).", min=0)] = 10.0,
    api_key_env: Annotated[Optional[str], typer.Option(
        help="Name of an environment variable holding the API key clients must send.")] = None,
    long_text: Annotated[LongText, typer.Option(help="Texts over max_seq_len: cut, or average windows.")] =
        LongText.truncate,
    workers: Annotated[Optional[int], typer.Option(
        help="Processes sharing the port, each with its own model and threads (default: chosen from the cores "
             "this process may use and the model's width, and said at start-up).", min=1)] = None,
    ort_spinning: Annotated[bool, typer.Option(help="Let ONNX Runtime's threads busy-wait between calls (faster "
                                                    "on idle cores, slower when the event loop shares them).")] = False,
):
    """HTTP API: POST /v1/predict with dynamic batching; /healthz, /readyz, /metrics, /docs."""
    from dataclasses import asdict

    quiet_warnings()
    from senti.core.runtime import available_cores
    from senti.serving import Predictor, export_folder
    from senti.serving.placement import placement_for
    from senti.serving.server import ServerConfig
    from senti.serving.server import serve as run_server

    api_key = api_key_from(api_key_env)
    cores = available_cores()
    with user_errors():
        placement = placement_for(export_folder.read_meta(model)[0], cores, workers, threads)
    workers, per_worker = placement.workers, placement.threads
    if workers > 2 * cores:  # each worker holds a model and its threads: 64 on 2 cores took 53 s and 6.8 GB
        raise fail(f"--workers {workers}: this process may use {cores} cores; use at most {2 * cores} workers "
                   "(one per core is the efficient layout)")
    if workers > cores:
        console.print(f"[yellow]--workers {workers} is more than the {cores} cores available: workers will "
                      "compete for them[/yellow]")
    options = dict(backend=backend.value, device=device, threads=per_worker, long_text=long_text.value,
                   max_windows=max_windows_per_text, ort_spinning=ort_spinning)
    with user_errors():
        config = ServerConfig(max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, max_queue=max_queue,
                              max_texts=max_texts, max_windows=max_windows, max_body_bytes=max_body_bytes,
                              body_timeout_s=body_timeout_s, header_timeout_s=body_timeout_s, api_key=api_key)

        def load():  # at start, and again on SIGHUP or POST /v1/admin/reload
            return Predictor.load(model, **options)

        predictor = load()  # also checks the export before any worker starts
    console.print(f"serving {model} ({predictor.backend_name}, version {predictor.version}) on http://{host}:{port} "
                  f"with {workers} worker(s) x {per_worker} thread(s) ({placement.why}; --workers/--threads "
                  "choose another) (docs: /docs; SIGHUP or POST /v1/admin/reload loads the export anew)")
    from senti.serving.http_guard import allowed_hosts

    if allowed_hosts(host) is None and not api_key:
        console.print(f"[yellow]listening on {host} without an API key: anyone who reaches the port can score, "
                      "read /v1/status and its texts' figures; give --api-key-env NAME[/yellow]")
    spec = {"model": str(model), "load": options, "api_key_env": api_key_env,
            "server": {k: v for k, v in asdict(config).items() if k != "api_key"}}
    if workers > 1:
        del predictor  # each worker loads its own
        run_server(None, config, host=host, port=port, workers=workers, worker_spec=spec)
        return
    run_server(predictor, config, host=host, port=port, reload=load)
