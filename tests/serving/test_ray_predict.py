"""`senti predict --engine ray`: Ray Data on a local 2-CPU Ray, against the in-process Predictor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import synthetic_rows

ray = pytest.importorskip("ray", reason="Ray Data is the optional 'scale' extra")
pa = pytest.importorskip("pyarrow")

from senti.serving import Predictor  # noqa: E402
from senti.serving.ray_predict import RayJob, predict_with_ray  # noqa: E402

ROWS = 3000


@pytest.fixture(scope="module")
def local_ray():
    """A Ray started as senti starts it: every server on loopback (ray.init alone listened on every interface)."""
    from senti.serving.ray_predict import start_local_ray

    start_local_ray(ray, 2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def expected(_exported):
    out, _ = _exported
    texts = sorted({t for _, t in synthetic_rows(ROWS, seed=21)})
    return texts, {t: p for t, p in zip(texts, Predictor.load(out, backend="onnx").predict(texts))}


def _check(rows: list[dict], ids_in: list[str], texts_by_id: dict, predictions: dict, bad_ids: set):
    assert len(rows) == len(ids_in)
    assert sorted(r["id"] for r in rows) == sorted(ids_in)  # every id exactly once
    for r in rows:
        if r["id"] in bad_ids:
            assert isinstance(r["error"], str) and r["label"] is None
            continue
        want = predictions[texts_by_id[r["id"]]]
        assert r["error"] is None and r["label"] == want.label
        assert r["score"] == pytest.approx(want.score, abs=1e-5)


def test_parquet_with_an_id_column(_exported, expected, local_ray, tmp_path):
    import pyarrow.parquet as pq

    out, _ = _exported
    texts, predictions = expected
    rows = [{"review_id": f"r{i}", "text": texts[i % len(texts)]} for i in range(ROWS)]
    bad = {"r7": None, "r99": None}
    for _i, row in enumerate(rows):
        if row["review_id"] in bad:
            row["text"] = None
    (tmp_path / "in").mkdir()
    pq.write_table(pa.Table.from_pylist(rows[:1500]), tmp_path / "in" / "a.parquet")
    pq.write_table(pa.Table.from_pylist(rows[1500:]), tmp_path / "in" / "b.parquet")
    job = RayJob(id_column="review_id", backend="onnx")
    result = predict_with_ray(out, str(tmp_path / "in"), str(tmp_path / "out.parquet"), job)
    assert result["rows_in"] == result["rows_out"] == ROWS and result["errors"] == 2
    # The serve rule's layout for a narrow model on Ray's 2 CPUs: one single-threaded actor a core (was 1 x 2)
    assert (result["actors"], result["threads_per_actor"]) == (2, 1) and "wide model" in result["layout_why"]
    scored = pq.read_table(tmp_path / "out.parquet").to_pylist()
    _check(scored, [r["review_id"] for r in rows], {r["review_id"]: r["text"] for r in rows}, predictions, set(bad))


def test_one_parquet_file_is_spread_over_every_actor(_exported, expected, local_ray, tmp_path, monkeypatch):
    """A Parquet file of one row group is read as one block, and one block makes one actor task: before the split,
    one of two actors scored the whole file while the other idled."""
    import os

    import pyarrow.parquet as pq

    import senti.serving.ray_predict as ray_predict

    out, _ = _exported
    texts, predictions = expected
    calls = tmp_path / "calls.txt"

    class Recorded(ray_predict.ScoreBatch):  # defined here, so Ray ships it by value to the actors
        def __call__(self, batch):
            with open(calls, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()}\n")
            return super().__call__(batch)

    monkeypatch.setattr(ray_predict, "ScoreBatch", Recorded)
    rows = [{"id": f"r{i}", "text": texts[i % len(texts)]} for i in range(ROWS)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "one.parquet")
    assert pq.ParquetFile(tmp_path / "one.parquet").metadata.num_row_groups == 1
    result = predict_with_ray(out, str(tmp_path / "one.parquet"), str(tmp_path / "out.parquet"), RayJob(
        id_column="id", actors=2, threads_per_actor=1, batch_size=16, backend="onnx"))
    assert result["rows_out"] == ROWS and result["errors"] == 0
    assert len(set(calls.read_text(encoding="utf-8").split())) == 2  # both actors scored
    _check(pq.read_table(tmp_path / "out.parquet").to_pylist(), [r["id"] for r in rows],
           {r["id"]: r["text"] for r in rows}, predictions, set())


def test_jsonl_without_ids_gets_row_numbers_and_bad_lines_become_error_rows(_exported, expected, local_ray,
                                                                             tmp_path):
    out, _ = _exported
    texts, predictions = expected
    lines, bad = [], set()
    for i in range(ROWS):
        if i in (10, 500):
            lines.append('{"text": broken')
            bad.add(str(i))
        elif i == 2000:
            lines.append(json.dumps({"text": 42}))
            bad.add(str(i))
        else:
            lines.append(json.dumps({"text": texts[i % len(texts)]}, ensure_ascii=False))
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = predict_with_ray(out, str(src), str(tmp_path / "out.jsonl"), RayJob(batch_size=16, backend="onnx"))
    assert result["rows_in"] == result["rows_out"] == ROWS and result["errors"] == 3
    scored = [json.loads(line) for part in sorted((tmp_path / "out.jsonl").iterdir())
              for line in part.read_text(encoding="utf-8").splitlines()]
    texts_by_id = {str(i): texts[i % len(texts)] for i in range(ROWS)}
    _check(scored, [str(i) for i in range(ROWS)], texts_by_id, predictions, bad)


def test_row_numbers_follow_the_input_order_across_files_of_different_sizes(_exported, expected, local_ray,
                                                                            tmp_path):
    """Without an id column a row's id is its position (files in sorted order). Ray Data hands blocks on as their
    tasks finish, so a big first file read after two small ones must still number its rows first."""
    import pyarrow.parquet as pq

    out, _ = _exported
    texts, predictions = expected
    sizes = {"a.parquet": 6000, "b.parquet": 40, "c.parquet": 40}
    (tmp_path / "in").mkdir()
    position, texts_by_id = 0, {}
    for name, size in sizes.items():
        chosen = [texts[(position + k) * 7 % len(texts)] for k in range(size)]
        pq.write_table(pa.table({"text": chosen}), tmp_path / "in" / name)
        texts_by_id.update({str(position + k): t for k, t in enumerate(chosen)})
        position += size
    result = predict_with_ray(out, str(tmp_path / "in"), str(tmp_path / "out.parquet"), RayJob(backend="onnx"))
    assert result["rows_in"] == result["rows_out"] == position and result["errors"] == 0
    _check(pq.read_table(tmp_path / "out.parquet").to_pylist(), list(texts_by_id), texts_by_id, predictions, set())


def test_the_plan_runs_once_and_the_progress_counts_written_rows(_exported, expected, local_ray, tmp_path,
                                                                 monkeypatch):
    """Ray Data executes the plan once (rows without ids were numbered after a `count()` that executed the read a
    first time), and the progress callback follows the rows written, up to the input's count."""
    from ray.data._internal.execution.streaming_executor import StreamingExecutor

    executions = []
    execute = StreamingExecutor.execute

    def counted(self, *args, **kwargs):
        executions.append(1)
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(StreamingExecutor, "execute", counted)
    out, _ = _exported
    texts, predictions = expected
    (tmp_path / "in").mkdir()
    position, texts_by_id = 0, {}
    for name, size in {"a.jsonl": 1500, "b.jsonl": 20, "c.jsonl": 1480}.items():
        chosen = [texts[(position + k) * 3 % len(texts)] for k in range(size)]
        (tmp_path / "in" / name).write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n"
                                                    for t in chosen), encoding="utf-8")
        texts_by_id.update({str(position + k): t for k, t in enumerate(chosen)})
        position += size
    seen = []
    result = predict_with_ray(out, str(tmp_path / "in"), str(tmp_path / "out.parquet"), RayJob(backend="onnx"),
                              progress=lambda rows, total: seen.append((rows, total)), progress_every_s=0.05)
    assert len(executions) == 1
    assert result["rows_in"] == result["rows_out"] == position == 3000 and result["errors"] == 0
    import pyarrow.parquet as pq

    _check(pq.read_table(tmp_path / "out.parquet").to_pylist(), list(texts_by_id), texts_by_id,
           predictions, set())
    assert seen and {total for _, total in seen} == {3000}
    assert [rows for rows, _ in seen] == sorted(rows for rows, _ in seen) and seen[-1][0] <= 3000


def test_bad_sources_are_clear_errors(_exported, tmp_path, local_ray):
    from senti.core.errors import SentiError

    out, _ = _exported
    with pytest.raises(SentiError, match="matches no file"):
        predict_with_ray(out, str(tmp_path / "*.parquet"), str(tmp_path / "o.parquet"))
    (tmp_path / "x.jsonl").write_text('{"text": "好"}\n', encoding="utf-8")
    with pytest.raises(SentiError, match="name it .parquet or .jsonl"):
        predict_with_ray(out, str(tmp_path / "x.jsonl"), str(tmp_path / "o.csv"))
    with pytest.raises(SentiError, match="not a senti export"):
        predict_with_ray(tmp_path, str(tmp_path / "x.jsonl"), str(tmp_path / "o.jsonl"))
    (tmp_path / "in").mkdir()  # a folder (or pattern) that also holds an earlier output: IsADirectoryError before
    (tmp_path / "in" / "x.jsonl").write_text('{"text": "好"}\n', encoding="utf-8")
    (tmp_path / "in" / "scored.jsonl").mkdir()
    (tmp_path / "in" / "scored.jsonl" / "part-0.jsonl").write_text("{}\n", encoding="utf-8")
    from senti.serving.ray_predict import _paths

    assert _paths(str(tmp_path / "in")) == [str(tmp_path / "in" / "x.jsonl")]
    assert _paths(str(tmp_path / "in" / "*.jsonl")) == [str(tmp_path / "in" / "x.jsonl")]
    (tmp_path / "fake.parquet").write_text("not parquet", encoding="utf-8")
    with pytest.raises(SentiError, match=r"fake\.parquet: not a readable Parquet file"):
        predict_with_ray(out, str(tmp_path / "fake.parquet"), str(tmp_path / "o2.parquet"))


def test_cli_says_what_it_did_in_one_line(_exported, tmp_path):
    """In a process of its own, as a user runs it: the summary with the layout and why, and none of Ray's notices."""
    import subprocess
    import sys

    out, _ = _exported
    (tmp_path / "x.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n"
                                              for t in ["好", "差", "还行"] * 20), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "senti.cli", "predict", "--model", str(out), "--engine", "ray",
                           "--input", str(tmp_path / "x.jsonl"), "--output", str(tmp_path / "o.jsonl")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    said = (done.stdout + done.stderr).strip().splitlines()
    assert len(said) == 1 and said[0].startswith("60 rows in, 60 rows out (0 error rows)"), said  # failed before:
    assert "actor(s) x" in said[0] and "cores" in said[0]  # a "Progress bars disabled" WARNING came first


def test_cli_aspect_columns_on_ray_and_a_one_line_answer_elsewhere(_exported, local_ray, tmp_path):
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from senti.cli import app

    listed = tmp_path / "aspects.json"
    listed.write_text(json.dumps({"aspects": ASPECTS}, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "x.jsonl").write_text('{"text": "价格太贵了"}\n{"text": "服务很好"}\n', encoding="utf-8")
    common = ["predict", "--model", str(_exported[0]), "--input", str(tmp_path / "x.jsonl"), "--aspects", str(listed)]
    done = CliRunner().invoke(app, [*common, "--engine", "ray", "--output", str(tmp_path / "o.parquet")])
    assert done.exit_code == 0, done.output
    table = pq.read_table(tmp_path / "o.parquet").to_pylist()
    assert sorted(r["aspect_price"] for r in table) == sorted(["not_mentioned", table[0]["aspect_price"]]) and \
        {"aspect_service", "aspect_service_score", "aspect_price_score"} <= set(table[0])
    local = CliRunner().invoke(app, [*common, "--output", str(tmp_path / "o.jsonl")])
    assert local.exit_code != 0 and "--aspects writes aspect columns with --engine ray" in local.output


def _one_text_through_the_cli(exported, tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    (tmp_path / "x.jsonl").write_text('{"text": "好"}\n', encoding="utf-8")
    return CliRunner().invoke(app, ["predict", "--model", str(exported[0]), "--engine", "ray", "--input",
                                    str(tmp_path / "x.jsonl"), "--output", str(tmp_path / "o.jsonl")])


def test_cli_without_ray_says_how_to_install(_exported, tmp_path, monkeypatch):
    import builtins


    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'", name="ray")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    result = _one_text_through_the_cli(_exported, tmp_path)
    assert result.exit_code == 2 and "pip install 'senti[scale]'" in result.output


def test_ray_calls_are_large_but_spread_over_the_actors():
    from senti.serving.ray_predict import rows_per_actor_call

    assert rows_per_actor_call(100_000, 1, 32) == 4096  # large inputs: big calls amortise Ray's per-call cost
    assert rows_per_actor_call(1_000, 2, 32) == 96  # small ones: at least 4 calls per actor
    assert rows_per_actor_call(10, 1, 32) == 32  # never less than one model batch
    assert rows_per_actor_call(50_000, 2, 32) % 32 == 0


@pytest.mark.slow
def test_memory_stays_flat_as_the_rows_grow_tenfold(_exported, tmp_path):
    """`senti predict --engine ray` as a user runs it, on 20,000 and then 200,000 JSONL rows without ids: the peak
    of the whole process tree's memory (PSS: driver, GCS, raylet, every worker; read every 0.5 s) grows by less
    than 150 MB. It grew with the input before: Ray's read_text held a whole file in one worker, and numbering
    rows took a count() and a zip that kept the input in order."""
    from experiments.ray_memory import run_once

    out, _ = _exported
    small, big = (run_once(str(out), rows, tmp_path, with_ids=False) for rows in (20_000, 200_000))
    for run in (small, big):
        assert run["exit"] == 0 and run["said"][-1].startswith(f"{run['rows']} rows in, {run['rows']} rows out"), run
    growth = big["peak_tree_pss_mb"] - small["peak_tree_pss_mb"]
    assert growth < 150, f"peak memory grew {growth} MB for ten times the rows ({small} -> {big})"


class _Plan:
    """Stands in for Ray's lazy dataset: writes one part file into the folder it is given, then does `then`."""

    def __init__(self, then=None):
        self.then = then

    def write_json(self, folder, ray_remote_args):
        Path(folder).mkdir()
        (Path(folder) / "part-0.jsonl").write_text('{"id": "0", "error": null}\n{"id": "1", "error": "x"}\n',
                                                   encoding="utf-8")
        if self.then:
            self.then()


def test_an_output_appears_whole_or_not_at_all():
    """Two runs given one --output both wrote into it (4,000 rows for 2,000), and an interrupted run left whole
    part files under the output's name with nothing to tell them from a finished output."""
    import contextlib
    import tempfile

    from senti.core.errors import SentiError
    from senti.serving.ray_predict import _write

    def watch(_):
        return contextlib.nullcontext()

    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "scored.jsonl"
        assert _write(_Plan(), dest, ".jsonl", {}, watch) == (2, 1)
        assert sorted(p.name for p in Path(tmp).iterdir()) == ["scored.jsonl"]  # no hidden folder left

        other = Path(tmp) / "other.jsonl"

        def another_run_finished_first():
            other.mkdir()
            (other / "theirs.jsonl").write_text("{}\n", encoding="utf-8")

        with pytest.raises(SentiError, match="written by another run meanwhile"):
            _write(_Plan(another_run_finished_first), other, ".jsonl", {}, watch)
        assert [p.name for p in other.iterdir()] == ["theirs.jsonl"]

        def interrupted():
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            _write(_Plan(interrupted), Path(tmp) / "cut.jsonl", ".jsonl", {}, watch)
        assert sorted(p.name for p in Path(tmp).iterdir()) == ["other.jsonl", "scored.jsonl"]


def test_an_interrupted_ray_run_says_nothing_was_written(_exported, tmp_path, monkeypatch):

    from senti.serving import ray_predict

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ray_predict, "predict_with_ray", stopped)
    result = _one_text_through_the_cli(_exported, tmp_path)
    assert result.exit_code == 130 and "interrupted: nothing written to" in result.output



ASPECTS = [{"name": "service", "keywords": ["服务", "态度"]}, {"name": "price", "keywords": ["价格", "贵"]}]


def test_ray_writes_each_aspects_answer_as_senti_aspects_gives_it(_exported, local_ray, tmp_path):
    from senti.core.aspects import parse_aspects
    from senti.serving.aspects import answer_aspects

    out, _ = _exported
    texts = ["服务态度很好，价格太贵了。", "价格实惠，推荐", "没有提到任何方面", "服务差。价格也贵。"] * 25
    lines = [json.dumps({"id": f"r{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(texts)]
    lines[7] = '{"id": "r7", "text": broken'
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    job = RayJob(batch_size=16, id_column="id", backend="onnx", aspects=ASPECTS)
    result = predict_with_ray(out, str(src), str(tmp_path / "out.parquet"), job)
    assert result["rows_out"] == len(texts) and result["errors"] == 1
    written = pq_rows(tmp_path / "out.parquet")
    errors = [r for r in written if r["error"]]
    assert len(errors) == 1 and errors[0]["aspect_service"] is None and errors[0]["aspect_price_score"] is None
    rows = {r["id"]: r for r in written if not r["error"]}
    want = answer_aspects(Predictor.load(out, backend="onnx"), texts, parse_aspects(ASPECTS, "test"))
    for i, answer in enumerate(want):
        if i == 7:  # the error row, above
            continue
        row = rows[f"r{i}"]
        for name, a in answer.items():
            assert row[f"aspect_{name}"] == a.polarity
            assert row[f"aspect_{name}_score"] == pytest.approx(a.score, abs=1e-6) if a.score is not None \
                else row[f"aspect_{name}_score"] is None
    assert rows["r2"]["aspect_price"] == "not_mentioned"


def test_a_bad_aspect_list_is_one_line_before_ray_starts(_exported, tmp_path):
    from senti.core.errors import SentiError

    out, _ = _exported
    (tmp_path / "x.jsonl").write_text('{"text": "好"}\n', encoding="utf-8")
    with pytest.raises(SentiError, match="--aspects: aspect 1: name 'a b' must be"):
        predict_with_ray(out, str(tmp_path / "x.jsonl"), str(tmp_path / "o.parquet"),
                         RayJob(aspects=[{"name": "a b", "keywords": ["x"]}]))
    with pytest.raises(SentiError, match="unit must be one of sentence, clause"):
        predict_with_ray(out, str(tmp_path / "x.jsonl"), str(tmp_path / "o.parquet"),
                         RayJob(aspects=ASPECTS, unit="word"))


def pq_rows(folder: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(folder).to_pylist()


def test_the_aspect_report_over_rays_output_joins_the_input_rows_by_id(_exported, local_ray, tmp_path):
    """Ray writes the id and the answers, not the date: `senti aspect-report --rows` joins them back, and counts
    what the report over `senti aspects`' own answers of the same rows counts."""
    from senti.core.aspects import parse_aspects
    from senti.serving.aspects import answer_aspects
    from senti.toolkit.surge.aspect_report import aspect_report, ray_joined_rows

    out, _ = _exported
    texts = ["服务态度很好，价格太贵了。", "价格实惠，推荐", "服务差。价格也贵。", "没有提到任何方面"] * 6
    days = ["2024-05-06", "2024-05-13"]
    rows = [{"id": f"r{i}", "date": days[i // 12], "text": t} for i, t in enumerate(texts)]
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    lines[5] = '{"id": "r5", "text": broken'  # an error row of Ray's, and a row the report cannot read
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    predict_with_ray(out, str(src), str(tmp_path / "out.parquet"),
                     RayJob(batch_size=8, id_column="id", backend="onnx", aspects=ASPECTS))
    joined = aspect_report(tmp_path / "out.parquet", period="week",
                           rows=ray_joined_rows(tmp_path / "out.parquet", src, "id", None))

    answers = answer_aspects(Predictor.load(out, backend="onnx"), texts, parse_aspects(ASPECTS, "test"))
    local = tmp_path / "answered.jsonl"
    local.write_text("".join(json.dumps({**r, "aspects": {n: a.to_json() for n, a in answers[i].items()}},
                                        ensure_ascii=False) + "\n" for i, r in enumerate(rows) if i != 5),
                     encoding="utf-8")
    direct = aspect_report(local, period="week")
    assert joined.periods == direct.periods == ["2024-W19", "2024-W20"] and joined.counts == direct.counts
    assert joined.rows == 24 and joined.first_skipped is not None and joined.first_skipped.startswith("line 6:")


def test_ray_answers_an_aspect_heads_export_from_its_heads(local_ray, tmp_path):
    from senti.core.aspects import read_aspects
    from senti.core.errors import SentiError
    from tests.helpers import synthetic_aspect_rows, train_aspect_heads

    data, _, export, _ = train_aspect_heads(tmp_path / "heads")
    texts = [r["text"] for r in synthetic_aspect_rows(40, seed=13)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", "text": t}, ensure_ascii=False) + "\n"
                           for i, t in enumerate(texts)), encoding="utf-8")
    listed = json.loads((data / "aspects.json").read_text(encoding="utf-8"))["aspects"]
    result = predict_with_ray(export, str(src), str(tmp_path / "out.parquet"),
                              RayJob(batch_size=16, id_column="id", backend="onnx", aspects=listed))
    assert result["rows_out"] == len(texts) and result["errors"] == 0
    rows = {r["id"]: r for r in pq_rows(tmp_path / "out.parquet")}
    want = Predictor.load(export, backend="onnx").aspects(texts, read_aspects(data / "aspects.json"))
    for i, answer in enumerate(want):
        for name, a in answer.items():
            assert rows[f"r{i}"][f"aspect_{name}"] == a.polarity
    parking = RayJob(batch_size=16, id_column="id", backend="onnx", aspects=[{"name": "parking", "keywords": ["停车"]}])
    with pytest.raises(SentiError, match="it has no head for parking"):
        predict_with_ray(export, str(src), str(tmp_path / "no.parquet"), parking)
