"""senti.core.layout: every artifact file name, the per-split names, and the work names of a run in progress."""

from __future__ import annotations

import os

import pytest

from senti.core import layout


def test_per_split_file_names_and_a_runs_own_files():
    assert layout.eval_results("dev") == "eval_dev.json" and layout.eval_domains("test") == "eval_domains_test.json"
    assert {layout.TRAIN_CONFIG, layout.METRICS, layout.PRETRAIN_STATE} <= set(layout.RUN_FILES)
    assert len(set(layout.ONNX_FILES.values())) == len(layout.ONNX_FILES)  # no two formats share a file


def test_work_names_are_hidden_and_carry_the_process_id():
    prefix = layout.work_prefix("export", "staging")
    assert prefix.startswith(".export.staging-") and prefix.endswith(f"-{os.getpid()}-")


def test_a_paddle_folder_of_either_graph_format_is_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no inference.json or inference.pdmodel"):
        layout.paddle_model_files(tmp_path)
    (tmp_path / "inference.pdmodel").write_bytes(b"")  # Paddle 2's layout
    assert layout.paddle_model_files(tmp_path)[0].endswith("inference.pdmodel")
    (tmp_path / "inference.json").write_bytes(b"")  # Paddle 3's (PIR) is preferred
    assert layout.paddle_model_files(tmp_path) == (str(tmp_path / "inference.json"),
                                                   str(tmp_path / layout.PADDLE_PARAMS))
