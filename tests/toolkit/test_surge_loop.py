"""The surge loop (issue 15): drift signals, picking texts worth labelling, continuing with replay, and
swapping a new export into a running server without losing a request."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import (
    AUTH,
    EMOTIONS,
    PARITY,
    assert_one_reload_shape,
    export_tiny,
    running_server,
    synthetic_rows,
    train_tiny,
    write_folder,
    write_rows,
)

from senti.core import layout
from senti.core.artifacts import SplitRecipe
from senti.core.errors import SentiError


def _metric(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def test_drift_metrics_move_on_shifted_input(_exported, tmp_path):
    out, record = _exported
    assert record["reference_stats"]["texts"] == len(PARITY) and record["parity_sample"]["texts"]
    with running_server(out) as (base, _):
        post = lambda texts: httpx.post(f"{base}/v1/predict", json={"texts": texts}, headers=AUTH)  # noqa: E731
        assert post([t for _, t in PARITY[:20]]).status_code == 200
        before = httpx.get(f"{base}/metrics").text
        assert _metric(before, "senti_unknown_tokens_total") == 0 and _metric(before, "senti_texts_total") == 20
        shifted = ["齉龘靐" * 3, "𠀀𠀁𠀂 ωψχ", "好" * 200]  # characters the vocabulary never saw, and a long text
        assert post(shifted).status_code == 200
        after = httpx.get(f"{base}/metrics").text
    assert _metric(after, "senti_unknown_tokens_total") > 0 and _metric(after, "senti_truncated_texts_total") == 1
    assert _metric(after, 'senti_confidence_count') == 23 and 'senti_predicted_total{label="positive"}' in after
    from typer.testing import CliRunner

    from senti.cli import app

    src = tmp_path / "shifted.txt"
    src.write_text("\n".join(shifted * 5) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["predict", "--model", str(out), "--input", str(src), "--output",
                                      str(tmp_path / "o.jsonl")])
    assert result.exit_code == 0, result.output
    assert "drift against the dev texts recorded at export" in result.output
    line = next(x for x in result.output.splitlines() if "outside the vocabulary" in x)
    assert "0.0% on dev" in line and "% here" in line and not line.endswith(" 0.0% here")


def test_select_picks_the_uncertain_and_never_a_duplicate_twice(_exported, tmp_path):
    import numpy as np

    from senti.serving import Predictor
    from senti.toolkit.surge.selection import select_file

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
        result = select_file(out, src, dst, budget=4, strategy=strategy)
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
    select_file(out, tsv, tmp_path / "picks.tsv", budget=2)
    header, *lines = (tmp_path / "picks.tsv").read_text(encoding="utf-8").splitlines()
    assert header.split("\t") == ["id", "text", "line", "guess", "confidence", "score", "reason"] and len(lines) == 2
    with pytest.raises(SentiError, match="cannot hold the scores"):
        select_file(out, src, tmp_path / "picks.txt", budget=2)


def test_replay_keeps_the_label_set_records_lineage_and_refuses_new_labels(tiny_checkpoint, tmp_path):
    ckpt, old_data = tiny_checkpoint
    new = write_folder(tmp_path / "new", synthetic_rows(80, seed=51), synthetic_rows(20, seed=52))
    metrics = train_tiny(tmp_path / "continued", new, model=str(ckpt), replay=str(old_data), replay_ratio=2.0,
                         epochs=1)
    assert metrics["data"]["replayed_rows"] == 160
    meta = json.loads((tmp_path / "continued" / layout.CHECKPOINT_META).read_text(encoding="utf-8"))
    assert meta["labels"] == ["negative", "positive"]
    assert meta["lineage"]["parent"] == str(ckpt.resolve()) and meta["lineage"]["replay"] == str(old_data)
    assert meta["lineage"]["replayed_rows"] == 160 and len(meta["lineage"]["parent_version"]) == 12
    emotions = write_folder(tmp_path / "emo", synthetic_rows(60, EMOTIONS), synthetic_rows(12, EMOTIONS))
    with pytest.raises(SentiError, match="label\\(s\\) anger, disgust, fear, joy, sadness, surprise are not among"):
        train_tiny(tmp_path / "bad", emotions, model=str(ckpt))


def test_reload_swaps_models_under_load_without_losing_a_request(_exported, tiny_checkpoint, tmp_path):
    """SIGHUP and the admin endpoint both swap in a re-exported model between batches; a broken export leaves
    the old one serving and says why; the admin endpoint wants the API key."""
    out, _ = _exported
    ckpt, data = tiny_checkpoint
    live = tmp_path / "live"
    shutil.copytree(out, live)
    retrained = train_tiny(tmp_path / "retrained", data, seed=99, epochs=1)  # different weights: another version
    assert retrained["best"]
    with running_server(live, "--max-wait-ms", "20") as (base, proc):
        first = httpx.get(f"{base}/readyz").json()["model_version"]
        results: dict[str, Any] = {"codes": [], "versions": set()}

        stop = {"at": time.monotonic() + 120}  # bounded whatever happens; moved up once the swap is seen

        async def load():  # 8 clients on loopback until 2 s after the new model answers
            async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
                async def client():
                    while time.monotonic() < stop["at"]:
                        r = await http.post("/v1/predict", json={"texts": ["非常好很满意", "太差了很失望"]})
                        results["codes"].append(r.status_code)
                        if r.status_code == 200:
                            results["versions"].add(r.json()["model_version"])
                            if r.json()["model_version"] != first and stop["at"] - time.monotonic() > 2:
                                stop["at"] = time.monotonic() + 2
                await asyncio.gather(*(client() for _ in range(8)))

        async def reload_during_load():
            task = asyncio.create_task(load())
            await asyncio.sleep(1.0)
            await asyncio.to_thread(export_tiny, tmp_path / "retrained", live, overwrite=True)  # replaces the folder
            proc.send_signal(signal.SIGHUP)
            await task

        asyncio.run(reload_during_load())
        second = httpx.get(f"{base}/readyz").json()
        assert second["model_version"] != first and second["reload"]["ok"] and second["reload"]["trigger"] == "SIGHUP"
        assert results["codes"] and set(results["codes"]) == {200}, "a request failed during the reload"
        assert results["versions"] == {first, second["model_version"]}
        assert httpx.post(f"{base}/v1/admin/reload").status_code == 401
        (live / layout.ONNX_FILES["onnx"]).write_bytes(b"not a model")  # a broken export
        broken = httpx.post(f"{base}/v1/admin/reload", headers=AUTH)
        assert broken.status_code == 409 and broken.json()["serving"] == second["model_version"]
        ready = httpx.get(f"{base}/readyz").json()
        assert ready["model_version"] == second["model_version"] and ready["reload"]["ok"] is False
        assert ready["reload"]["error"]
        assert_one_reload_shape(ready["reload"], "admin")
        assert httpx.get(f"{base}/v1/status", headers=AUTH).json()["reload"] == ready["reload"]
        answer = httpx.post(f"{base}/v1/predict", json={"texts": ["非常好很满意"]}, headers=AUTH)
        assert answer.status_code == 200 and answer.json()["model_version"] == second["model_version"]


def test_select_checks_its_output_first_keeps_every_column_and_counts_what_it_skips(_exported, tmp_path):
    from senti.toolkit.surge.selection import select_file

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
            select_file(nowhere, pool, dst, budget=5)
    assert pool.read_bytes() == before

    result = select_file(_exported[0], pool, tmp_path / "picks.jsonl", budget=5)
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
    result = select_file(_exported[0], big, tmp_path / "few.tsv", budget=3)
    assert result["read"] == 6000 and result["candidates_kept"] == 1000 and result["picked"] == 3


def test_replay_finds_the_parents_data_by_content_and_never_replays_its_held_out_rows(tmp_path, monkeypatch):
    from senti.toolkit.data.splits import load_recipe, load_splits
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import continuation

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    write_rows(tmp_path / "data" / "one.tsv", synthetic_rows(300, seed=61))
    train_tiny(tmp_path / "parent", Path("data/one.tsv"), epochs=1, seed=3)
    parent = json.loads((tmp_path / "parent" / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["data"]
    held = {e.text for s in (load_recipe(SplitRecipe(**parent)),) for e in s.dev + s.test}
    new_data = write_rows(tmp_path / "new.tsv", synthetic_rows(100, seed=62))
    shutil.copy(tmp_path / "data" / "one.tsv", tmp_path / "copy.tsv")
    write_rows(tmp_path / "other.tsv", synthetic_rows(300, seed=61)[:150] + synthetic_rows(100, seed=63))

    def replay(data, ratio=1.0, dataset=new_data):
        config = TrainConfig(model=str(tmp_path / "parent"), dataset=str(dataset), output_dir="unused", seed=9,
                             replay=str(data), replay_ratio=ratio)
        _, rows, lineage = continuation(config, load_splits(str(dataset), seed=9))
        assert lineage is not None  # a continued model has a lineage
        return rows, lineage["replay_notes"]

    for spelling in ("./data/one.tsv", str(tmp_path / "data" / "one.tsv"), "copy.tsv"):  # same rows, any path
        rows, notes = replay(spelling)
        assert rows and not {e.text for e in rows} & held and notes == [], spelling
    rows, notes = replay("other.tsv")  # other data holding some of the parent's rows: its held-out ones stay out
    assert not {e.text for e in rows} & held and any("parent's dev or test split" in n for n in notes)
    assert replay("copy.tsv", ratio=0.0001)[1] == [f"--replay-ratio 0.0001 x {len(load_splits(str(new_data), seed=9).train)}"
                                                   " new training rows replays no row"]
    rows, notes = replay("copy.tsv", ratio=100)
    assert len(rows) == len(load_recipe(SplitRecipe(**parent)).train) and "all replayed" in notes[0]
    assert any("the new dataset itself" in n for n in replay("new.tsv")[1])


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
    expected = np.exp(whole - whole.max(1, keepdims=True))
    np.testing.assert_allclose(score(texts), expected / expected.sum(1, keepdims=True), atol=1e-5)
    huge = "这个酒店很干净服务也好 " * 100_000
    started = time.monotonic()
    assert score([huge]).shape == (1, len(labels))
    assert time.monotonic() - started < 3.0


def test_continuing_a_checkpoint_keeps_its_sequence_length_by_default(tmp_path):
    """The surge loop continued a 256-token model at `senti train`'s 128 without a word; now a continued checkpoint
    keeps its own length unless --max-seq-len says otherwise, and a new model still gets 128."""
    data = write_folder(tmp_path / "data", synthetic_rows(200, seed=1), synthetic_rows(40, seed=2))
    train_tiny(tmp_path / "parent", data, max_seq_len=64, epochs=1)
    train_tiny(tmp_path / "child", data, model=str(tmp_path / "parent"), epochs=1)
    train_tiny(tmp_path / "fresh", data, epochs=1, max_steps=2)

    def length(name):
        return json.loads((tmp_path / name / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["max_seq_len"]

    assert (length("parent"), length("child"), length("fresh")) == (64, 64, 128)


def test_replay_never_trains_on_the_parents_held_out_texts_after_its_file_grew(tmp_path, monkeypatch):
    # Train on two.tsv, append 300 rows to it, continue with --replay two.tsv --replay-ratio 5: 228 of 1,280 replayed
    # rows were the parent's own dev and test rows (the grown file no longer matched, and was cut anew).
    from senti.toolkit.data.seen import read_hashes
    from senti.toolkit.data.splits import load_recipe, load_splits
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import continuation

    monkeypatch.chdir(tmp_path)
    two = write_rows(tmp_path / "two.tsv", synthetic_rows(300, seed=71))
    train_tiny(tmp_path / "parent", two, epochs=1, seed=3)
    assert read_hashes(tmp_path / "parent", layout.HELDOUT_TEXT_HASHES) is not None
    parent = json.loads((tmp_path / "parent" / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["data"]
    held = {e.text for s in (load_recipe(SplitRecipe(**parent)),) for e in s.dev + s.test}
    with two.open("a", encoding="utf-8") as fh:
        fh.write("".join(f"{label}\t{text}\n" for label, text in synthetic_rows(300, seed=72)))
    new = write_rows(tmp_path / "new.tsv", synthetic_rows(320, seed=73))
    config = TrainConfig(model=str(tmp_path / "parent"), dataset=str(new), output_dir="unused", seed=9,
                         replay=str(two), replay_ratio=5)
    _, rows, lineage = continuation(config, load_splits(str(new), seed=9))
    assert rows and not {e.text for e in rows} & held
    assert lineage is not None and any("the parent held them out" in n for n in lineage["replay_notes"])
