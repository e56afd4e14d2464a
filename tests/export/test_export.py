"""`senti export`: every format reloads, agrees with the dynamic graph, and the known traps are caught."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from senti.core import layout
from senti.core.errors import SentiError
from senti.export.onnx_convert import ExportError, check_graph
from senti.export.parity import compare, logits_by_shape
from senti.export.pipeline import ExportConfig
from senti.export.specs import ERNIE_SEQUENCE_CLASSIFICATION as SPEC
from senti.serving.backends import open_backend
from senti.serving.parity import judge
from tests.helpers import PARITY, export_tiny


def test_export_writes_every_format_with_parity_figures(_exported):
    out, record = _exported
    assert json.loads((out / layout.EXPORT_META).read_text(encoding="utf-8")) == record
    assert set(record["formats"]) == {"paddle", "onnx", "onnx-opt", "onnx-int8", "onnx-int8-static", "onnx-fp16"}
    for fmt in ("paddle", "onnx", "onnx-opt"):
        parity = record["formats"][fmt]["parity"]
        assert parity["max_abs_logit_diff"] <= 1e-4 and parity["label_agreement"] == 1.0 and parity["fit"], parity
        assert set(parity["max_abs_logit_diff_by_shape"]) == {"batch_1", "batch_32"}
    int8 = record["formats"]["onnx-int8"]["parity"]
    assert int8["accuracy"] > 0.9 and "accuracy_drop" in int8
    static = record["formats"]["onnx-int8-static"]
    assert static["parity"]["fit"] and static["parity"]["max_batch_dependence"] <= 1e-6, static
    assert static["calibration"]["texts"] > 0 and static["quantized_matmuls"] > 0
    assert record["parity_texts"] == len(PARITY) and record["reference_accuracy"] > 0.9
    assert record["io"]["inputs"] == {"input_ids": ["batch", "sequence"], "token_type_ids": ["batch", "sequence"]}
    assert record["io"]["outputs"] == {"logits": ["batch", 2]}
    assert record["labels"] == ["negative", "positive"] and record["max_seq_len"] == 128
    assert record["formats"]["onnx-opt"]["fusions"].get("SkipLayerNormalization", 0) >= 2
    assert (out / layout.VOCAB).is_file() and not list(out.parent.glob(".tiny.staging-*"))
    # Nothing of training travels: no optimizer state, no pickled weights outside Paddle Inference's params.
    assert not list(out.rglob("*.pdparams")) and not list(out.rglob("*.pdopt"))


def test_formats_load_in_plain_runtimes_without_this_project(_exported, _trained_checkpoint):
    """The export is self-contained: paddle.inference and onnxruntime load it with no senti import."""
    out, record = _exported
    ids = np.array([[2, 10, 11, 12, 3], [2, 20, 21, 3, 0]], dtype=np.int64)
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        import onnxruntime as ort
        import paddle.inference as pi
        ids = np.array({ids.tolist()}, dtype=np.int64); tt = np.zeros_like(ids)
        out = {{}}
        for name in ("model.onnx", "model.opt.onnx", "model.int8.onnx"):
            s = ort.InferenceSession("{out}/" + name, providers=["CPUExecutionProvider"])
            out[name] = s.run(["logits"], {{"input_ids": ids, "token_type_ids": tt}})[0].tolist()
        graph = "{out}/paddle/inference.json"
        config = pi.Config(graph, "{out}/paddle/inference.pdiparams")
        config.disable_gpu()
        p = pi.create_predictor(config)
        for n, v in zip(p.get_input_names(), (ids, tt)):
            p.get_input_handle(n).copy_from_cpu(v)
        p.run()
        out["paddle"] = p.get_output_handle(p.get_output_names()[0]).copy_to_cpu().tolist()
        assert not any(m.split(".")[0] in ("toolkit", "export", "serving", "paddlenlp") for m in sys.modules)
        print(json.dumps(out))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd="/",
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    logits = json.loads(result.stdout.strip().splitlines()[-1])

    import paddle

    from senti.core.checkpoint import load_checkpoint

    model, _, _ = load_checkpoint(_trained_checkpoint / "checkpoint")
    with paddle.no_grad():
        expected = model(paddle.to_tensor(ids), token_type_ids=paddle.zeros_like(paddle.to_tensor(ids))).numpy()
    for name in ("model.onnx", "model.opt.onnx", "paddle"):
        np.testing.assert_allclose(np.array(logits[name]), expected, atol=1e-4, err_msg=name)
    assert (np.array(logits["model.int8.onnx"]).argmax(1) == expected.argmax(1)).all()


def test_triton_repository_parses_with_tritons_own_schema(_exported):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    out, record = _exported
    model_dir = out / record["triton"]
    config = text_format.Parse((model_dir / "config.pbtxt").read_text(encoding="utf-8"),
                               model_config_pb2.ModelConfig())
    assert config.name == "senti" and config.platform == "onnxruntime_onnx" and config.max_batch_size == 64
    assert [i.name for i in config.input] == ["input_ids", "token_type_ids"]
    assert all(list(i.dims) == [-1] and i.data_type == model_config_pb2.TYPE_INT64 for i in config.input)
    assert config.output[0].name == "logits" and list(config.output[0].dims) == [2]
    assert config.dynamic_batching.max_queue_delay_microseconds == 5000
    assert (model_dir / "1" / "model.onnx").read_bytes() == (out / "model.onnx").read_bytes()
    assert (model_dir / "labels.txt").read_text(encoding="utf-8").split() == record["labels"]


def test_weights_never_applied_before_to_static_is_caught(tiny_checkpoint, tmp_path, monkeypatch):
    import paddle

    import senti.export.pipeline as pipeline

    real_save = pipeline.save_static

    def save_fresh_weights(model, folder, spec):
        for p in model.parameters():  # what a model looks like when its state dict was never set
            p.set_value(paddle.normal(0.0, 0.02, p.shape).astype(p.dtype))
        return real_save(model, folder, spec)

    monkeypatch.setattr(pipeline, "save_static", save_fresh_weights)
    ckpt, _ = tiny_checkpoint
    with pytest.raises(ExportError, match="disagrees with the dynamic graph: paddle: max"):
        export_tiny(ckpt, tmp_path / "out", formats=("paddle",))
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.staging-*"))


def test_inputs_fed_in_swapped_order_are_caught(_exported):
    import onnx

    out, record = _exported
    model = onnx.load(str(out / "model.onnx"))
    swap = {"input_ids": "token_type_ids", "token_type_ids": "input_ids"}
    for value in model.graph.input:
        value.name = swap[value.name]
    for node in model.graph.node:
        node.input[:] = [swap.get(i, i) for i in node.input]
    broken = out.parent / "swapped"
    broken.mkdir()
    onnx.save(model, str(broken / layout.ONNX_FILES["onnx"]))
    # Ids below the type vocabulary (4), so the swapped graph runs instead of failing a Gather.
    encoded = [[2, *([1, 3] * n), 3] for n in range(3, 40)]
    gold = np.zeros(len(encoded), dtype=np.int64)
    reference = logits_by_shape(open_backend(out, "onnx"), encoded, 0)
    verdict = judge("onnx", compare(reference, logits_by_shape(open_backend(broken, "onnx"), encoded, 0), gold),
                    1.0)
    assert not verdict["fit"] and verdict["max_abs_logit_diff"] > 1e-2


def test_empty_onnx_graph_is_refused():
    import onnx
    from onnx import TensorProto, helper

    empty = helper.make_model(helper.make_graph(
        [], "empty", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 2])]))
    with pytest.raises(ExportError, match="the ONNX graph is empty"):
        check_graph(empty, SPEC, Path("model.onnx"))
    assert isinstance(empty, onnx.ModelProto)


def test_int8_that_scores_badly_is_marked_unfit():
    reference = {"batch_32": np.eye(2)[[0, 1] * 50], "batch_1": np.eye(2)[[0, 1] * 8]}
    collapsed = {"batch_32": np.tile([1.0, 0.0], (100, 1)), "batch_1": np.tile([1.0, 0.0], (16, 1))}
    gold = np.array([0, 1] * 50)
    verdict = judge("onnx-int8", compare(reference, collapsed, gold), 1.0)
    assert verdict["fit"] is False and verdict["accuracy_drop"] == pytest.approx(0.5)
    assert "beyond 0.01" in verdict["reason"]


def test_bad_inputs_give_one_line_errors_and_no_output(tiny_checkpoint, tmp_path):
    ckpt, _ = tiny_checkpoint
    with pytest.raises(SentiError, match="not a senti checkpoint"):
        export_tiny(tmp_path, tmp_path / "a")
    bad_vocab = tmp_path / "bad_vocab"
    shutil.copytree(ckpt, bad_vocab)
    with (bad_vocab / layout.VOCAB).open("a", encoding="utf-8") as fh:
        fh.write("额外\n")
    with pytest.raises(SentiError, match=r"vocab.txt has \d+ tokens but the embeddings have \d+ rows"):
        export_tiny(bad_vocab, tmp_path / "b")
    blocker = tmp_path / "a_file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(ExportError, match="cannot create"):
        export_tiny(ckpt, blocker / "out")
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("old", encoding="utf-8")
    with pytest.raises(ExportError, match="already exists; pass --overwrite"):
        export_tiny(ckpt, existing)
    assert (existing / "keep.txt").read_text(encoding="utf-8") == "old"
    with pytest.raises(ExportError, match="formats must be"):
        ExportConfig(model=str(ckpt), output_dir="x", formats=("tensorrt",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "bad_vocab", "existing", "trained"]


def test_overwrite_replaces_an_export_and_paddle_2_layout_is_found(tiny_checkpoint, tmp_path):
    ckpt, _ = tiny_checkpoint
    out = tmp_path / "exp"
    out.mkdir()
    (out / "stale.txt").write_text("old", encoding="utf-8")
    export_tiny(ckpt, out, formats=("onnx",), overwrite=True)
    assert not (out / "stale.txt").exists() and not (out / layout.PADDLE_DIR).exists()
    assert (out / layout.ONNX_FILES["onnx"]).is_file()
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "inference.pdmodel").write_bytes(b"")
    assert layout.paddle_model_files(legacy)[0].endswith("inference.pdmodel")


def test_export_cli(tiny_checkpoint, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    ckpt, data = tiny_checkpoint
    runner = CliRunner()
    result = runner.invoke(app, ["export", "--model", str(ckpt), "--output-dir", str(tmp_path / "e"),
                                 "--formats", "onnx", "--parity-samples", "50"])
    assert result.exit_code == 0, result.output
    assert "export parity on 50 dev texts" in result.output
    result = runner.invoke(app, ["export", "--model", str(tmp_path), "--output-dir", str(tmp_path / "f")])
    assert result.exit_code == 2 and "not a senti checkpoint" in result.output


def test_the_triton_client_recipe_answers_as_senti_serving_does(_exported):
    """examples/triton/client.py's steps (tokenizer.json, a padded batch, the ONNX model, `answers`) with ONNX Runtime
    standing in for the Triton server: the calibrated probabilities and unsure flags senti.serving gives."""
    import runpy

    import onnxruntime as ort
    from tokenizers import Tokenizer

    from senti.serving import Predictor

    out, record = _exported
    recipe = runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / "triton" / "client.py"))
    texts = [t for _, t in PARITY[:64]]
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    tok.enable_padding(pad_id=record["tokenizer"]["pad_token_id"])
    ids = np.array([e.ids for e in tok.encode_batch(texts)], dtype=np.int64)
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    logits = session.run(None, {"input_ids": ids, "token_type_ids": np.zeros_like(ids)})[0]
    got = recipe["answers"](logits, record)
    want = Predictor.load(out, backend="onnx").predict(texts)
    assert record["calibration"] is not None and record["abstain"] is not None
    assert [g["label"] for g in got] == [w.label for w in want]
    assert [g["unsure"] for g in got] == [w.unsure for w in want]
    assert max(abs(g["probabilities"][lab] - w.probabilities[lab]) for g, w in zip(got, want)
               for lab in record["labels"]) < 1e-5  # a padded batch against one text a call
