"""File names of every artifact senti writes: the one place readers and writers agree on.

`serving` owns this module because it is the lowest layer: `toolkit` writes checkpoints and
`export` writes export folders, and both (plus `serving` itself) read them through these names.
"""

# A training checkpoint is a PaddleNLP `save_pretrained` folder plus these files.
CHECKPOINT_META = "senti.json"  # labels, max_seq_len, tokenizer settings, versions
TRAIN_CONFIG = "train_config.json"  # the exact TrainConfig used
METRICS = "metrics.json"  # per-epoch figures
CURVES_PNG = "training_curves.png"
PADDLENLP_CONFIG = "config.json"  # written by PaddleNLP 2.8 save_pretrained
PADDLENLP_WEIGHTS = "model_state.pdparams"
VOCAB = "vocab.txt"

# Metadata schema version: bump when a reader must change.
META_VERSION = 1
