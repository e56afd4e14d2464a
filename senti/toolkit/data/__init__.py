"""The data wing: reading labelled rows into splits (splits), pretraining corpora (corpus), label logs
(label_log), the hashes of texts a model has seen (seen), and encoding and batching texts (batching).
Imports no other wing."""
