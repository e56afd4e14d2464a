"""How to spread a model over the cores a process may use: worker processes (or Ray actors) x threads each.

Measured on 2 cores (docs/results/serving.md): a 128-wide student is too small for two
threads to share one call (they lose about a fifth to synchronisation), so it runs best as one single-threaded
worker per core; so does a 312-wide model once each worker has a socket of its own (before, one worker got every
connection of a burst and 2 x 1 looked slow). Wider models get more threads per call (not measured: the rule's
guess). The rule goes by the model's hidden size, which export.json records.
"""

from __future__ import annotations

from dataclasses import dataclass

# Threads one model call keeps busy, by the model's hidden size (the widest bound that fits).
THREADS_BY_WIDTH = ((384, 1), (512, 2), (10**9, 4))


@dataclass(frozen=True)
class Placement:
    workers: int
    threads: int
    why: str


def threads_per_call(hidden_size: int) -> int:
    return next(threads for width, threads in THREADS_BY_WIDTH if hidden_size <= width)


def choose_placement(cores: int, hidden_size: int | None, workers: int | None = None,
                     threads: int | None = None) -> Placement:
    """Workers x threads for `cores` and a model `hidden_size` wide; `workers`/`threads` given by the user win.
    The reason is one clause, for the start-up line."""
    if workers and threads:
        return Placement(workers, threads, "as asked")
    if workers:
        return Placement(workers, max(1, cores // workers), f"{cores} cores / {workers} workers")
    per_call = threads or min(cores, threads_per_call(hidden_size or 768))
    chosen = max(1, cores // per_call)
    width = f"a {hidden_size}-wide model" if hidden_size else "a model of unknown width"
    why = (f"{cores} cores, {per_call} thread(s) a call for {width}" if not threads
           else f"{cores} cores / {per_call} threads")
    return Placement(chosen, per_call, why)


def model_width(meta) -> int | None:
    """The hidden size an export's metadata (serving.export_folder.read_meta) records, or None when it does not
    (an older export)."""
    width = meta.model.hidden_size if meta.model else None
    return int(width) if isinstance(width, int) and width > 0 else None


def placement_for(meta, cores: int, workers: int | None = None, threads: int | None = None) -> Placement:
    """`choose_placement` for an export, from its metadata (serving.export_folder.read_meta, read once by the
    caller): its width matters only when the user did not give both numbers."""
    return choose_placement(cores, None if workers and threads else model_width(meta), workers, threads)
