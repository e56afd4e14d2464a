"""senti.serving.streaming: prediction files in and out (a byte-order mark, outputs that would overwrite
the input or lose rows), and a bad row that becomes an error row."""

from __future__ import annotations

import json

LONE = "x\ud800"  # valid JSON ("x\\ud800"), but no tokenizer can take it


def test_prediction_files_bom_and_bad_outputs(_exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    runner = CliRunner()
    src = tmp_path / "in.tsv"
    src.write_bytes("\ufefftext\tid\n非常好很满意\t1\n".encode())
    dst = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["predict", "--model", str(out), "--backend", "onnx", "--input", str(src),
                                 "--output", str(dst)])
    assert result.exit_code == 0, result.output
    assert '"text": "非常好很满意"' in dst.read_text(encoding="utf-8")
    txt = tmp_path / "in.txt"
    txt.write_bytes("\ufeff非常好很满意\n".encode())
    result = runner.invoke(app, ["predict", "--model", str(out), "--input", str(txt), "--output", str(dst)])
    assert result.exit_code == 0 and '"text": "非常好很满意"' in dst.read_text(encoding="utf-8")
    (tmp_path / "folder.jsonl").mkdir()
    for output, message in [(tmp_path / "missing" / "o.jsonl", "does not exist"),
                            (tmp_path / "folder.jsonl", "is a folder"),
                            (txt.with_suffix(".tsv"), "is the input file")]:
        result = runner.invoke(app, ["predict", "--model", str(out), "--input", str(txt.with_suffix(".tsv")
                                                                                  if "input" in message else txt),
                                     "--output", str(output)])
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, message


def test_predict_file_turns_a_lone_surrogate_into_an_error_row(_exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"text": t}) for t in ("非常好很满意", LONE, "太差了很失望")]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dst = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--backend", "onnx", "--input", str(src),
                                      "--output", str(dst)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]
    assert [r["label"] for r in rows] == ["positive", None, "negative"] and rows[1]["error"]


def test_an_id_column_is_carried_to_the_output_and_a_row_without_one_is_an_error_row(_exported, tmp_path):
    # senti predict kept only the line number: the input's ids were lost, so answers could not be joined back.
    from typer.testing import CliRunner

    from senti.cli import app

    out, _ = _exported
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        {"review_id": "a-1", "text": "非常好很满意"}, {"text": "没有编号"}, {"review_id": 7, "text": "太差了"}]),
        encoding="utf-8")
    for dst in (tmp_path / "out.jsonl", tmp_path / "out.csv"):
        result = CliRunner().invoke(app, ["predict", "--model", str(out), "--input", str(src), "--output", str(dst),
                                          "--id-column", "review_id"])
        assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["line"], r["id"], r["error"]) for r in rows] == [(1, "a-1", None), (2, None, "missing 'review_id'"),
                                                                 (3, "7", None)]
    assert rows[0]["label"] and rows[1]["label"] is None
    import csv

    table = list(csv.DictReader((tmp_path / "out.csv").open(encoding="utf-8")))
    assert [r["id"] for r in table] == ["a-1", "", "7"] and table[1]["error"] == "missing 'review_id'"
    txt = tmp_path / "in.txt"
    txt.write_text("好\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--input", str(txt), "--output",
                                      str(tmp_path / "o.jsonl"), "--id-column", "review_id"])
    assert result.exit_code == 2 and "a .txt input has no columns" in result.output
