"""senti's toolkit, in wings that import downwards only (tests/test_package.py checks it):

    cluster     starting data-parallel runs and the workers' script           -> training
    surge       select, label, the label page                                -> evaluation, data
    training    settings, models, the one run and its loop, train/distill/pretrain -> evaluation, data
    evaluation  metrics, the n-gram baseline, scoring                          -> data
    data        splits, corpora, label logs, seen-text hashes, batching

`records` (the artifacts' schemas) and `logs` sit beside the wings; they import none of them.
"""
