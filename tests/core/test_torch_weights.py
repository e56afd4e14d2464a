"""The weights-only reader of PyTorch zip checkpoints: arrays equal to what was written, no torch, no code run."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from senti.core.errors import ArtifactError
from senti.core.torch_weights import load_torch_weights
from tests.helpers import torch_state_pickle, write_torch_bin


def test_arrays_come_back_as_written_contiguous_and_transposed(tmp_path):
    rng = np.random.default_rng(0)
    tensors: dict[str, np.ndarray] = {"a.weight": rng.standard_normal((3, 5)).astype(np.float32),
               "b.weight": rng.standard_normal((4, 2)).astype(np.float32),
               "half": rng.standard_normal(7).astype(np.float16), "ids": np.arange(6, dtype=np.int64)[None]}
    got = load_torch_weights(write_torch_bin(tmp_path / "w.bin", tensors, transposed=("b.weight",)))
    assert sorted(got) == sorted(tensors)
    for name, array in tensors.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape
        np.testing.assert_array_equal(got[name], array)


def test_a_global_a_state_dict_does_not_need_is_refused_by_name(tmp_path):
    path = write_torch_bin(tmp_path / "w.bin", {"x": np.zeros(2, np.float32)}, rebuild=("os", "system"))
    with pytest.raises(ArtifactError, match="names os.system") as err:
        load_torch_weights(path)
    assert "\n" not in str(err.value)


def test_a_reduce_of_a_builtin_is_refused(tmp_path):
    path = tmp_path / "w.bin"
    with zipfile.ZipFile(path, "w") as archive:  # eval("...") the way a hostile pickle spells it
        archive.writestr("archive/data.pkl", b"\x80\x02cbuiltins\neval\nX\x04\x00\x00\x001+1;\x85R.")
    with pytest.raises(ArtifactError, match="names builtins.eval"):
        load_torch_weights(path)


def test_a_truncated_storage_is_refused(tmp_path):
    path = write_torch_bin(tmp_path / "w.bin", {"x": np.ones((4, 4), np.float32)})
    cut = tmp_path / "cut.bin"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(cut, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(name, data[:-8] if name.endswith("data/0") else data)
    with pytest.raises(ArtifactError, match="truncated or altered"):
        load_torch_weights(cut)


def test_a_missing_storage_and_a_cut_zip_are_refused(tmp_path):
    path = tmp_path / "w.bin"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", torch_state_pickle([("x", "0", "float32", [2], [1], 2)]))
    with pytest.raises(ArtifactError, match="storage archive/data/0 is missing"):
        load_torch_weights(path)
    whole = write_torch_bin(tmp_path / "whole.bin", {"x": np.ones(1000, np.float32)}).read_bytes()
    (tmp_path / "half.bin").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ArtifactError, match="not a PyTorch zip checkpoint"):
        load_torch_weights(tmp_path / "half.bin")


def test_a_shape_reaching_past_its_storage_is_refused(tmp_path):
    path = tmp_path / "w.bin"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", torch_state_pickle([("x", "0", "float32", [3, 3], [3, 1], 4)]))
        archive.writestr("archive/data/0", np.zeros(4, np.float32).tobytes())
    with pytest.raises(ArtifactError, match="reaches past its storage"):
        load_torch_weights(path)


def test_a_legacy_or_foreign_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "old.bin").write_bytes(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.")  # torch<1.6's magic number
    with pytest.raises(ArtifactError, match="before 1.6"):
        load_torch_weights(tmp_path / "old.bin")
