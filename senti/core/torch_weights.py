"""PyTorch `.bin` weights (`torch.save`'s zip format) read as numpy arrays, without torch and without running code.

A `pytorch_model.bin` is a zip holding `<name>/data.pkl` (a pickle that names the tensors) and one file per storage
(`<name>/data/<key>`). Unpickling it with Python's `pickle` would import and call whatever the pickle names, so the
pickle is read by an unpickler that resolves only the globals a state dict needs (an `OrderedDict`, tensor rebuilds,
storage types) to senti's own functions, which build numpy views over the zip's storage files; any other global is
refused in one line naming it. The same set of globals as `torch.load(weights_only=True)` accepts for a plain
state dict, without torch installed. Every shape, stride and offset is checked against its storage's size.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

from senti.core.errors import ArtifactError

MAX_PICKLE_BYTES = 64 << 20  # a state dict's pickle names tensors; BERT-large's is under 100 kB
MAX_TENSORS = 100_000

# torch's storage classes by name -> numpy dtype (bfloat16 is read as its 16 bits and widened to float32).
STORAGE_DTYPES = {
    "FloatStorage": np.dtype("<f4"), "HalfStorage": np.dtype("<f2"), "DoubleStorage": np.dtype("<f8"),
    "BFloat16Storage": np.dtype("<u2"), "LongStorage": np.dtype("<i8"), "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"), "CharStorage": np.dtype("i1"), "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
}


class _Storage:
    """A storage type named in the pickle (only its name is kept: nothing of torch is imported)."""

    def __init__(self, name: str):
        self.name, self.dtype = name, STORAGE_DTYPES[name]


class _Tensor:
    """A tensor as the pickle describes it; made into an array once the whole pickle has been read and checked."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


def _rebuild_tensor(storage, offset, size, stride, *_rest):
    return _Tensor(storage, offset, size, stride)


def _rebuild_parameter(data, *_rest):
    return data


# (module, name) -> what the unpickler gives for it: nothing else can be named by the file.
_ALLOWED = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): _Storage(name) for name in STORAGE_DTYPES},
}


class _WeightsUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, where: Path):
        super().__init__(io.BytesIO(data))
        self.where = where

    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise ArtifactError(f"{self.where}: refused: its pickle names {module}.{name}, which a file of weights "
                                "does not need (loading it with torch could run code)") from None

    def persistent_load(self, pid):
        # ('storage', storage type, key, location, number of elements)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _Storage)
                and isinstance(pid[2], str) and isinstance(pid[4], int)):
            raise ArtifactError(f"{self.where}: refused: an unknown persistent id in its pickle")
        return pid


def _archive_root(names: list[str], where: Path) -> str:
    roots = {n.split("/", 1)[0] for n in names if n.endswith("/data.pkl") and n.count("/") == 1}
    if len(roots) != 1:
        raise ArtifactError(f"{where}: not a PyTorch zip checkpoint (no single <name>/data.pkl); files saved by "
                            "torch before 1.6 are not read: re-save them with a current torch or as safetensors")
    return roots.pop()


def _array(tensor: _Tensor, raw: bytes, where: Path, name: str) -> np.ndarray:
    dtype = tensor.storage[1].dtype
    size, stride, offset = tuple(tensor.size), tuple(tensor.stride), tensor.offset
    if len(size) != len(stride) or not all(isinstance(x, int) and x >= 0 for x in (*size, *stride, offset)):
        raise ArtifactError(f"{where}: tensor {name}: bad size, stride or offset")
    numel = tensor.storage[4]
    if len(raw) != numel * dtype.itemsize:
        raise ArtifactError(f"{where}: tensor {name}: its storage has {len(raw)} bytes, not {numel} elements "
                            "(a truncated or altered file)")
    last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else offset - 1
    if last >= numel:
        raise ArtifactError(f"{where}: tensor {name}: its shape reaches past its storage")
    flat = np.frombuffer(raw, dtype=dtype)
    view = np.lib.stride_tricks.as_strided(flat[offset:] if all(size) else flat[:0], shape=size,
                                           strides=[s * dtype.itemsize for s in stride], writeable=False)
    out = np.array(view)  # a copy: contiguous, owning its memory
    if tensor.storage[1].name == "BFloat16Storage":
        out = (out.astype(np.uint32) << 16).view(np.float32)
    return out


def load_torch_weights(path: Path) -> dict[str, np.ndarray]:
    """name -> array from a PyTorch zip checkpoint (`pytorch_model.bin`), refusing, in one line, any pickle global
    that a state dict does not need, a truncated file, and shapes that reach past their storage."""
    path = Path(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise ArtifactError(f"{path}: not a PyTorch zip checkpoint ({err}); files saved by torch before 1.6 "
                            "are not read: re-save them as safetensors") from None
    with archive:
        names = archive.namelist()
        root = _archive_root(names, path)
        order = f"{root}/byteorder"
        if order in names and archive.read(order).strip() not in (b"little", b""):
            raise ArtifactError(f"{path}: big-endian tensors are not read")
        info = archive.getinfo(f"{root}/data.pkl")
        if info.file_size > MAX_PICKLE_BYTES:
            raise ArtifactError(f"{path}: its pickle is over {MAX_PICKLE_BYTES >> 20} MB; not a state dict")
        try:
            state = _WeightsUnpickler(archive.read(info), path).load()
        except ArtifactError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, AttributeError) as err:
            raise ArtifactError(f"{path}: unreadable pickle ({type(err).__name__}: {err})") from None
        except zipfile.BadZipFile as err:
            raise ArtifactError(f"{path}: a damaged zip ({err})") from None
        if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
            state = state["state_dict"]
        if not isinstance(state, dict) or len(state) > MAX_TENSORS or \
                not all(isinstance(k, str) and isinstance(v, _Tensor) for k, v in state.items()):
            raise ArtifactError(f"{path}: not a state dict (a mapping of names to tensors)")
        out = {}
        for name, tensor in state.items():
            member = f"{root}/data/{tensor.storage[2]}"
            if member not in names:
                raise ArtifactError(f"{path}: tensor {name}: its storage {member} is missing (a truncated file)")
            try:
                raw = archive.read(member)
            except (zipfile.BadZipFile, OSError, EOFError) as err:
                raise ArtifactError(f"{path}: tensor {name}: unreadable storage ({err})") from None
            out[name] = _array(tensor, raw, path, name)
        return out
