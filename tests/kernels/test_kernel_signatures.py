"""Each C kernel's prototype in kernels.c against its ctypes binding in native.py: one declaration per signature,
held to the C source by this test (the two used to be written twice with nothing tying them)."""

from __future__ import annotations

import ctypes
import re

import pytest

from senti.kernels import build, native

C_TYPES = {"int64_t": ctypes.c_int64, "int": ctypes.c_int, "float": ctypes.c_float, "uint64_t": ctypes.c_uint64}
PROTOTYPE = re.compile(r"^void (senti_\w+)\(([^)]*)\)\s*\{", re.M)
EXPORTED = re.compile(r"^[a-z].*\b(senti_\w+)\(", re.M)  # every function kernels.c exports, whatever it returns


def _binding(parameter: str):
    """The ctypes type a C parameter crosses as: any pointer is a buffer's address."""
    parameter = " ".join(parameter.split())
    if "*" in parameter:
        return ctypes.c_void_p
    kind = parameter.removeprefix("const ").rsplit(" ", 1)[0]
    return C_TYPES[kind]


def prototypes(source: str) -> dict:
    return {name: [_binding(p) for p in params.split(",")] for name, params in PROTOTYPE.findall(source)}


def test_every_exported_kernel_has_its_binding_and_every_binding_its_kernel():
    found = prototypes(build.SOURCE.read_text())
    assert set(found) == set(native.SIGNATURES)
    for name, arguments in found.items():
        assert native.SIGNATURES[name] == arguments, name


def test_only_the_source_digest_is_exported_beside_the_bound_kernels():
    """A new non-void export would escape the check above: only `senti_source_digest` (read by native._open) may."""
    assert set(EXPORTED.findall(build.SOURCE.read_text())) - set(native.SIGNATURES) == {"senti_source_digest"}


def test_the_check_catches_a_binding_that_drifted():
    source = build.SOURCE.read_text().replace("void senti_gelu_fwd(const float *x, float *y, int64_t n)",
                                               "void senti_gelu_fwd(const float *x, float *y, int n)")
    assert prototypes(source)["senti_gelu_fwd"] != native.SIGNATURES["senti_gelu_fwd"]


def test_a_required_kernel_that_does_not_build_fails_instead_of_falling_back(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTI_REQUIRE_KERNELS", "1")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("SENTI_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTI_NATIVE_KERNELS", "build")  # not the library built at install
    native.load.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="SENTI_REQUIRE_KERNELS is set and senti's C kernels are off: no C"):
            native.load()
    finally:
        native.load.cache_clear()
