"""The ground every stage stands on: file layout, artifact schemas and the checkpoint reader, errors,
the row reader, batching, runtime settings and stopping. Imports no other senti package; paddle and
paddlenlp only inside the functions that load weights."""
