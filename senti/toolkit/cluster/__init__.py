"""The cluster wing: starting a data-parallel run through paddle.distributed.launch on one node or several
(launch, launcher) and the script each worker runs (worker). Imports the training wing."""
