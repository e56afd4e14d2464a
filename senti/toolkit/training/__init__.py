"""The training wing: settings (config), models, the one run and its loop (run, loop), its three kinds (train,
distill, pretrain), checkpoints and resume state, the peers of a data-parallel run (collective), the curves
(plots) and a checkpoint's way out (exporting). Imports the data and evaluation wings."""
