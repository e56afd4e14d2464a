"""`senti eval` over several domains: one table row per dataset (or per value of a column), the baseline beside each."""

from __future__ import annotations

import json

from senti.core import layout
from tests.helpers import synthetic_rows, write_folder, write_rows


def test_eval_scores_several_domains_with_the_baseline_beside_each(tiny_checkpoint, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app
    from senti.toolkit.evaluation.evaluate import evaluate_model

    ckpt, _ = tiny_checkpoint
    a = write_folder(tmp_path / "books", synthetic_rows(60, seed=11), synthetic_rows(20, seed=12),
                     synthetic_rows(40, seed=13))
    b = write_folder(tmp_path / "phones", synthetic_rows(60, seed=21), synthetic_rows(20, seed=22),
                     synthetic_rows(30, seed=23))
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(a), "--dataset", str(b)])
    assert result.exit_code == 0, result.output
    assert "books" in result.output and "phones" in result.output and "baseline" in result.output
    report = json.loads((ckpt / layout.eval_domains("test")).read_text(encoding="utf-8"))
    assert list(report["domains"]) == ["books", "phones"]
    assert [d["n"] for d in report["domains"].values()] == [40, 30]
    # each domain's figures are those of scoring it alone, and the baseline is fitted once on the model's data
    alone = evaluate_model(ckpt, str(b), "test").to_json()  # as eval_test.json holds it
    phones = report["domains"]["phones"]
    assert phones["accuracy"] == alone["accuracy"] and phones["confusion_matrix"] == alone["confusion_matrix"]
    assert phones["baseline"]["scored"]["accuracy"] == alone["baseline"]["scored"]["accuracy"]
    assert phones["baseline"]["train_rows"] == report["domains"]["books"]["baseline"]["train_rows"]


def test_eval_groups_one_file_by_a_domain_column(tiny_checkpoint, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    ckpt, _ = tiny_checkpoint
    rows = synthetic_rows(50, seed=31)
    shops = ["fruit" if i % 5 else "dairy" for i in range(len(rows))]
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": lab, "shop": s}, ensure_ascii=False) + "\n"
                            for (lab, t), s in zip(rows, shops)), encoding="utf-8")
    out = tmp_path / "domains.json"
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(data), "--group-by", "shop",
                                      "--output", str(out), "--no-baseline"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["split"] == "all" and report["group_by"] == "shop"
    assert {k: v["n"] for k, v in report["domains"].items()} == {"dairy": 10, "fruit": 40}

    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(data), "--group-by", "region"])
    assert result.exit_code == 2 and f"{data}:1: no column 'region' (--group-by)" in result.output
    two = write_rows(tmp_path / "two.tsv", rows)
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(two), "--dataset", str(data),
                                      "--group-by", "shop"])
    assert result.exit_code == 2 and "give exactly one --dataset FILE" in result.output


def test_eval_by_group_scores_every_row_in_one_pass_and_shows_names_as_text(tiny_checkpoint, tmp_path, monkeypatch):
    """A thousand groups took most of a minute (one model pass and one read of the training hashes each); a group
    named with rich markup or terminal codes was printed as markup and raw bytes; an empty value was called a
    missing column."""
    from typer.testing import CliRunner

    from senti.cli import app
    from senti.toolkit.evaluation import evaluate

    ckpt, _ = tiny_checkpoint
    rows = synthetic_rows(300, seed=41)
    names = [f"shop{i % 150}" for i in range(299)] + ["[bold]red[/bold]\x1b[31m"]
    data = tmp_path / "many.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": lab, "shop": s}, ensure_ascii=False) + "\n"
                            for (lab, t), s in zip(rows, names)), encoding="utf-8")
    passes = []
    predict = evaluate.Scorer.probabilities

    def counted(self, texts):
        passes.append(len(texts))
        return predict(self, texts)

    monkeypatch.setattr(evaluate.Scorer, "probabilities", counted)
    out = tmp_path / "domains.json"
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(data), "--group-by", "shop",
                                      "--output", str(out), "--no-baseline"])
    assert result.exit_code == 0, result.output
    assert passes == [300]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert len(report["domains"]) == 151 and sum(d["n"] for d in report["domains"].values()) == 300
    assert "[bold]" in result.output and "\x1b" not in result.output  # as text (the cell is cut at 80 columns)
    from senti.cli.common import shown

    assert shown("[bold]red[/bold]\x1b[31m") == "\\[bold]red\\[/bold]\\x1b[31m"
    alone = evaluate.Scorer(ckpt).score([e for e in evaluate.domain_rows([str(data)], "all", ["negative", "positive"],
                                                                          ckpt, None, group_by="shop")["shop7"]])
    assert report["domains"]["shop7"]["confusion_matrix"] == alone["confusion_matrix"]

    data.write_text(json.dumps({"text": "很满意", "label": "positive", "shop": None}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(data), "--group-by", "shop"])
    assert result.exit_code == 2 and "column 'shop' is empty" in result.output


def test_eval_refuses_a_dataset_given_twice_and_points_a_chnsenticorp_file_to_its_folder(tiny_checkpoint, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    ckpt, _ = tiny_checkpoint
    a = write_folder(tmp_path / "books", synthetic_rows(60, seed=11), synthetic_rows(20, seed=12),
                     synthetic_rows(40, seed=13))
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(a), "--dataset", str(a)])
    assert result.exit_code == 2 and "is given twice" in result.output  # it gave one row for the two
    zero_one = [("1" if lab == "positive" else "0", t) for lab, t in synthetic_rows(40, seed=14)]
    folder = write_folder(tmp_path / "csc", zero_one, zero_one[:10], zero_one[:20])
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(folder / "test.tsv")])
    assert result.exit_code == 2 and f"give the folder ({folder}) with --split test" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["eval", "--model", str(ckpt), "--dataset", str(folder), "--no-baseline"])
    assert result.exit_code == 0, result.output
