"""senti.toolkit.surge.selection (`senti select`): the uncertain texts first, never a near-duplicate twice,
the output checked before any work, every input column kept, a huge text read only as far as the model reads."""

from __future__ import annotations

import json
import time

import pytest

from senti.core.errors import SentiError
from tests.helpers import (
    synthetic_rows,
    write_rows,
)


def test_select_picks_the_uncertain_and_never_a_duplicate_twice(_exported, tmp_path):
    import numpy as np

    from senti.serving import Predictor
    from senti.toolkit.surge.selection import Selection, select_file

    out, _ = _exported
    texts = sorted({t for _, t in synthetic_rows(120, seed=41)} |
                   {a + b for a in ("非常好", "太差了", "喜欢", "讨厌") for b in ("但是很失望", "推荐购买", "东西")})
    probs = np.array([[p.probabilities[lab] for lab in ("negative", "positive")]
                      for p in Predictor.load(out).predict(texts)])
    margin = np.abs(probs[:, 0] - probs[:, 1])
    order = [texts[i] for i in np.argsort(margin, kind="stable")]
    least_sure = order[0]
    near = [least_sure + "。", least_sure + "！"]  # near-duplicates of the least sure text
    rows = [{"id": f"t{i}", "text": t} for i, t in enumerate(texts)] + \
           [{"id": f"dup{k}", "text": least_sure} for k in range(5)] + [{"id": f"near{k}", "text": t}
                                                                         for k, t in enumerate(near)]
    src = tmp_path / "new.jsonl"
    src.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    picks = {}
    for strategy in ("uncertainty", "diverse", "random"):
        dst = tmp_path / f"{strategy}.jsonl"
        result = select_file(out, src, dst, Selection(budget=4, strategy=strategy))
        picks[strategy] = [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]
        assert result["picked"] == 4 and len({p["text"] for p in picks[strategy]}) == 4  # no duplicate twice
        assert all("score" in p and p["reason"] and "id" in p for p in picks[strategy])
    unsure = picks["uncertainty"]
    assert [p["score"] for p in unsure] == sorted(p["score"] for p in unsure)
    assert unsure[0]["score"] <= margin.min() + 1e-6 and max(p["score"] for p in unsure) <= sorted(margin)[3] + 1e-6
    family = {least_sure, *near}
    assert len(family & {p["text"] for p in unsure}) >= 2  # uncertainty alone takes near-duplicates
    diverse = {p["text"] for p in picks["diverse"]}
    assert len(family & diverse) == 1  # diverse takes one of them
    tsv = tmp_path / "new.tsv"
    write_rows(tsv, [(r["id"], r["text"]) for r in rows], header=("id", "text"))
    select_file(out, tsv, tmp_path / "picks.tsv", Selection(budget=2))
    header, *lines = (tmp_path / "picks.tsv").read_text(encoding="utf-8").splitlines()
    assert header.split("\t") == ["id", "text", "line", "guess", "confidence", "score", "reason"] and len(lines) == 2
    with pytest.raises(SentiError, match="cannot hold the scores"):
        select_file(out, src, tmp_path / "picks.txt", Selection(budget=2))


def test_select_checks_its_output_first_keeps_every_column_and_counts_what_it_skips(_exported, tmp_path):
    from senti.toolkit.surge.selection import Selection, select_file

    pool = tmp_path / "pool.jsonl"
    rows = [{"id": i, "text": t, "score": f"user-{i}", "line": "mine", "reason": "theirs"}
            for i, (_, t) in enumerate(synthetic_rows(50, seed=3))]
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    for k in range(0, 45, 3):  # 15 unreadable rows of 50
        lines[k] = "{not json"
    pool.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = pool.read_bytes()
    nowhere = tmp_path / "no-model"  # the output is refused before any model is looked for
    for dst, says in ((pool, "is the input file"), (tmp_path / "missing" / "p.jsonl", "does not exist"),
                      (tmp_path, "is a folder"), (tmp_path / "dir.jsonl", "is a folder")):
        (tmp_path / "dir.jsonl").mkdir(exist_ok=True)
        with pytest.raises(SentiError, match=says):
            select_file(nowhere, pool, dst, Selection(budget=5))
    assert pool.read_bytes() == before

    result = select_file(_exported[0], pool, tmp_path / "picks.jsonl", Selection(budget=5))
    assert result["unreadable"] == 15 and result["unreadable_lines"] == [1, 4, 7, 10, 13, 16, 19, 22, 25, 28]
    assert result["read"] == 50 and result["picked"] == 5
    picks = [json.loads(x) for x in (tmp_path / "picks.jsonl").read_text(encoding="utf-8").splitlines()]
    for p in picks:  # the user's columns untouched, senti's beside them under prefixed names
        assert p["score"] == f"user-{p['id']}" and p["line"] == "mine" and p["reason"] == "theirs"
        assert isinstance(p["senti_score"], float) and p["senti_reason"] and p["senti_line"] == p["id"] + 1
    from senti.toolkit.surge.labeling import read_picks

    assert [p.reason for p in read_picks(tmp_path / "picks.jsonl")] == [p["senti_reason"] for p in picks]

    big = tmp_path / "big.txt"  # a pool far larger than the budget keeps only a bounded set of candidates
    big.write_text("".join(f"{t}{i}\n" for i, (_, t) in enumerate(synthetic_rows(6000, seed=4))), encoding="utf-8")
    result = select_file(_exported[0], big, tmp_path / "few.tsv", Selection(budget=3))
    assert result["read"] == 6000 and result["candidates_kept"] == 1000 and result["picked"] == 3


def test_select_with_a_checkpoint_reads_only_the_head_of_a_huge_text(tiny_checkpoint, tmp_path):
    """With a checkpoint, select tokenized each text whole with PaddleNLP's tokenizer: a 1.2 MB line took 10 s
    (and memory in proportion). Now only what the model reads is tokenized, with the same answers."""
    import numpy as np

    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.evaluation.evaluate import predict_logits
    from senti.toolkit.surge.selection import load_scorer

    checkpoint, _ = tiny_checkpoint
    score, labels, _ = load_scorer(checkpoint)
    texts = [t for _, t in synthetic_rows(30, seed=8)] + ["质量很好，物流很快，" * 40]
    net, tokenizer, meta = load_checkpoint(checkpoint)
    whole = predict_logits(net, encode_texts(tokenizer, texts, meta.max_seq_len)[0], 64)
    from senti.core.calibration import calibrated_probabilities

    expected = calibrated_probabilities(whole, meta.calibration)  # as every runtime answers
    np.testing.assert_allclose(score(texts), expected, atol=1e-5)
    huge = "这个酒店很干净服务也好 " * 100_000
    started = time.monotonic()
    assert score([huge]).shape == (1, len(labels))
    assert time.monotonic() - started < 3.0


def test_select_by_aspect_ranks_by_each_texts_least_sure_aspect_and_leaves_out_texts_with_none(_exported, tmp_path):
    """--aspects: a text's margin is that of its least sure mentioned aspect, as `senti aspects` answers it; texts
    that mention no aspect are counted, never picked; the reason names the aspect and its unit."""
    from senti.core.aspects import Aspect
    from senti.serving import Predictor
    from senti.serving.aspects import answer_aspects
    from senti.toolkit.surge.selection import Selection, select_file

    out, _ = _exported
    aspects = [Aspect("delivery", ("物流", "快递")), Aspect("quality", ("质量",))]
    texts = [f"{a}，{b}" for a in ("物流很快", "快递太慢了", "物流一般") for b in ("质量很好", "质量太差了", "东西还行")]
    texts += ["东西不错，喜欢", "太差了，失望"]  # no aspect
    src = tmp_path / "pool.txt"
    src.write_text("\n".join(texts) + "\n", encoding="utf-8")
    answers = answer_aspects(Predictor.load(out), texts, aspects, unit="clause")
    margins = {t: min(abs(2 * a.score - 1) for a in row.values() if a.score is not None)
               for t, row in zip(texts, answers) if any(a.score is not None for a in row.values())}
    dst = tmp_path / "picks.jsonl"
    result = select_file(out, src, dst, Selection(budget=4, aspects=aspects, unit="clause"))
    picks = [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]
    assert result["no_aspect"] == 2 and result["picked"] == 4
    assert [p["text"] for p in picks] == sorted(margins, key=lambda t: (margins[t], texts.index(t)))[:4]
    for p in picks:
        assert p["score"] == pytest.approx(margins[p["text"]], abs=1e-5)
        assert p["reason"].startswith(("aspect delivery: margin", "aspect quality: margin")) and " on \"" in p["reason"]
        assert "between" not in p["reason"]
    nothing = tmp_path / "none.txt"
    nothing.write_text("东西不错\n太差了\n", encoding="utf-8")
    with pytest.raises(SentiError, match="no texts to choose from \\(2 mention none of the aspects\\)"):
        select_file(out, nothing, tmp_path / "none.jsonl", Selection(budget=2, aspects=aspects))


def test_senti_select_with_aspects_from_the_command_line(_exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    src = tmp_path / "pool.txt"
    src.write_text("物流很快，质量很好\n快递太慢了\n东西不错\n", encoding="utf-8")
    listed = tmp_path / "aspects.json"
    listed.write_text(json.dumps({"aspects": [{"name": "delivery", "keywords": ["物流", "快递"]}]}), encoding="utf-8")
    result = CliRunner().invoke(app, ["select", "--model", str(_exported[0]), "--input", str(src), "--output",
                                      str(tmp_path / "picks.jsonl"), "--budget", "5", "--aspects", str(listed)])
    assert result.exit_code == 0, result.output
    assert "2 of 3 rows picked by uncertainty" in result.output and "1 mention no aspect" in result.output
    listed.write_text(json.dumps({"aspects": [{"name": "bad name!", "keywords": ["x"]}]}), encoding="utf-8")
    result = CliRunner().invoke(app, ["select", "--model", str(_exported[0]), "--input", str(src), "--output",
                                      str(tmp_path / "more.jsonl"), "--budget", "5", "--aspects", str(listed)])
    assert result.exit_code != 0 and "aspects.json" in result.output
