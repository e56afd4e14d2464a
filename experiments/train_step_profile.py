"""Where a training step of `senti train`'s default path spends its time: Paddle's profiler by operator.

    python -m experiments.train_step_profile [--shape 4l-312h] [--batch-size 32] [--steps 6]
    python -m experiments.train_step_profile --timing [--no-dropout]     (the median step, no profiler)
    ... [--kernels senti|python|linear|paddle]     (senti's CPU kernels with its C kernels, without them, Dense
                                                   alone, or Paddle's own)

Builds the model and data as `senti train --model scratch:SHAPE --dataset ../shared/data/chnsenticorp` does (the
n-gram head included), takes the epoch's batches of median padded width, and prints the operator table of
`--steps` profiled steps (forward, backward and the AdamW update) after two warm-up steps. `--timing` prints the
median of 15 steps instead; `--no-dropout` sets every dropout to 0 (an upper bound of what a cheaper dropout
could save, not a setting senti offers). Paddle flags such as FLAGS_use_mkldnn=1 go in the environment.
"""

from __future__ import annotations

import argparse


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="4l-312h")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--dataset", default="../shared/data/chnsenticorp")
    parser.add_argument("--timing", action="store_true")
    parser.add_argument("--no-dropout", action="store_true")
    parser.add_argument("--kernels", choices=["senti", "python", "linear", "paddle"], default="senti",
                        help="senti: as senti train on a CPU (Dense and senti's C kernels); python: Dense and "
                             "MaskDropout, without the C kernels; linear: Dense only; paddle: Paddle's own kernels")
    args = parser.parse_args(argv)
    from senti.core.runtime import configure_runtime

    configure_runtime()
    import numpy as np
    import paddle.profiler as profiler

    from senti.toolkit.data.batching import length_bucketed_batches
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.loop import make_optimizer, optimizer_step
    from senti.toolkit.training.train import TrainRun

    config = TrainConfig(model=f"scratch:{args.shape}", dataset=args.dataset, output_dir="runs/step-profile",
                         overwrite=True, batch_size=args.batch_size, max_seq_len=128, baseline=False, lr=1e-4)
    run = TrainRun(config, lambda: (1e-4, "given"), say=lambda _: None)
    run.prepare()
    lengths = run.lengths
    optimizer, _ = make_optimizer(list(run.model.named_parameters()), run.config, 1000)
    batches = length_bucketed_batches(lengths, args.batch_size, np.random.default_rng(0))
    widths = np.array([max(lengths[j] for j in b) for b in batches])
    batches = [batches[k] for k in np.argsort(np.abs(widths - np.median(widths)))][: max(args.steps, 15) + 2]
    if args.no_dropout:
        import paddle

        for layer in run.model.sublayers():
            if isinstance(layer, paddle.nn.Dropout):
                layer.p = 0.0
            if isinstance(layer, paddle.nn.MultiHeadAttention):
                layer.dropout = 0.0
    if args.kernels != "paddle":  # as senti train's Run does on a CPU
        from senti.kernels.cpu_kernels import use_cpu_kernels

        use_cpu_kernels(run.model, 0, dropout=args.kernels != "linear", use_native=args.kernels == "senti")
    run.model.train()
    if args.timing:
        import time

        times = []
        for n, index in enumerate(batches):
            started = time.perf_counter()
            optimizer_step(run.loss(index).loss, optimizer)
            if n >= 2:
                times.append(time.perf_counter() - started)
        print(f"median step {np.median(times) * 1000:.0f} ms over {len(times)} steps")
        return
    batches = batches[: args.steps + 2]
    # on_trace_ready: the summary below is the output; by default Paddle also writes a 190,000-line Chrome trace into
    # ./profiler_log of the working directory (the repository's root, where the docs say to run this)
    prof = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU], scheduler=(2, 2 + args.steps),
                             on_trace_ready=lambda _: None)
    prof.start()
    for index in batches:
        step = run.loss(index)
        optimizer_step(step.loss, optimizer)
        float(step.loss)
        prof.step()
    prof.stop()
    prof.summary(sorted_by=profiler.SortedKeys.CPUTotal, op_detail=False, thread_sep=False, time_unit="ms",
                 views=[profiler.SummaryView.OperatorView])


if __name__ == "__main__":
    main()
