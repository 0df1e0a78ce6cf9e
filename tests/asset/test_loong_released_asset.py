"""Loong as released (issue 18, acceptance 3), through the Dagster graph: the shared 1,600 Loong items with
invented documents for seven of them in the release's folder layout (tests/fixtures/loong_docs), the packaged
``loong`` config's sources and builder with two of its tasks and two small sets (the tiny documents are far
below Loong's 10K tokens), answered by the real SmolLM2 and judged with Loong's rubric by the same model served by llama-cpp-python's
OpenAI-compatible server. The items whose documents are missing are rejected records; benchmark_scores holds
Loong's task x set table: per cell the average judge score over the verdicts read, the perfect rate (share of
them at 100) and the scoring success (share of verdicts read), each over the cell's instances (micro).

A 135M judge rarely ends with the ``[[score]]`` line, so most cells have a scoring success below 1 (printed
with -s); the table is checked against the verdicts in the lake, whatever they are."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for
from servers import llama_server, needs_llama_server, smollm2_gguf

from lc_pipeline.config import PACKAGED_CONFIGS
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.resources.parquet_io import read_table
from lc_pipeline.runner import Runner
from lc_pipeline.score.benchmark_scores import ALL_LENGTHS, PERFECT_RATE, SCORING_SUCCESS

ROOT = Path(__file__).resolve().parents[2]
LOONG = ROOT.parent / "shared" / "data" / "loong" / "loong.jsonl"
pytestmark = [
    *needs_llama_server, pytest.mark.slow,
    pytest.mark.skipif(not LOONG.is_file(), reason=f"no Loong items at {LOONG}"),
]

MODEL = "smollm2-135m"
# Two of Loong's tasks over two small sets (a CPU judge call takes a minute on a loaded machine): the
# spotlight item (237 cl100k tokens) and the paper Citation&Reference item (498) in set1, the judgment
# classification item (570) in set2.
TASKS = ["spotlight_locating", "clustering"]
SETS = {"set1": [0, 520], "set2": [520, None]}
CELLS = {("spotlight_locating", "set1"): 1, ("clustering", "set1"): 1, ("clustering", "set2"): 1}
JUDGE = "judge:loong"


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("loong_released")
    folder = root / "data" / "loong"  # $LCP_DATA/loong as released: loong.jsonl and doc/
    folder.mkdir(parents=True)
    (folder / "loong.jsonl").symlink_to(LOONG)
    shutil.copytree(ROOT / "tests" / "fixtures" / "loong_docs", folder / "doc")
    config = yaml.safe_load((PACKAGED_CONFIGS / "loong.yaml").read_text())
    config["released"].update(bounds=SETS, tasks=TASKS)
    config.update(lengths=list(SETS), max_new_tokens=16, models=[MODEL])
    (root / "loong.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    settings = settings_for(root, root / "loong.yaml")
    with pytest.MonkeyPatch.context() as mp, dg.instance_for_test() as instance, \
            llama_server(smollm2_gguf(), alias="smollm2", n_ctx=8192) as url:
        mp.setenv("LCP_DATA", str(root / "data"))
        pipeline = build_pipeline(settings)
        judge = JudgeResource(base_url=url, model="smollm2", max_tokens=64, max_concurrency=1,
                              cache_path=str(settings.lake_dir / "_cache" / "judge.sqlite"))
        resources = {**pipeline.resources, "judge": judge}
        # `lcp run`'s runner: generations, scores and (Loong's headline is the judge, and one is configured)
        # judge_scores per set, in one Dagster run per set, before benchmark_scores
        runner = Runner(dataclasses.replace(pipeline, resources=resources), instance, echo=lambda m: None)
        assert runner.run([MODEL]) is not None  # the leaderboard: every step ran
        assert [label for label in runner.ran if "judge_scores" in label] == [
            f"generations + judge_scores + metric_scores [{level}|{MODEL}]" for level in SETS]
    return settings.lake_dir


def test_items_with_their_documents_run_and_the_others_are_rejected_naming_the_file(lake):
    instances = read_table(lake / "instances")
    assert instances.height == 3 and set(instances["length"]) == set(SETS) and set(instances["task"]) == set(TASKS)
    assert (set(instances["benchmark"]), set(instances["suite"])) == ({"loong"}, {"released"})
    rejected = read_table(lake / "rejected_records")
    assert rejected.height == 1600 - 7 and set(rejected["field"]) == {"doc"}  # 7 items have all their documents
    assert rejected["reason"].str.contains("not found under").all()
    for row in instances.iter_rows(named=True):
        fields = json.loads(row["record_fields"])
        assert row["prompt"].count(row["context"]) == 1 and fields["instruction"] in row["prompt"]
        assert all(h in row["context"] for h in fields["doc_headers"])


def test_the_judge_fills_loongs_task_by_set_table(lake, capfd):
    instances = read_table(lake / "instances")
    generations = read_table(lake / "generations").filter(pl.col("model") == MODEL)
    assert generations.height == 3 and set(generations["truncation_policy"]) == {"drop_documents"}
    verdicts = read_table(lake / "judge_scores").filter(pl.col("model") == MODEL)
    assert verdicts.height == 3 and set(verdicts["rubric"]) == {"loong"}
    judged = verdicts.join(instances.select("instance_id", "task", pl.col("length").alias("set")), on="instance_id")

    table = read_table(lake / "benchmark_scores").filter(pl.col("benchmark") == "loong")
    tasks = table.filter(pl.col("level") == "task")
    cells = judged.group_by("task", "set").agg(
        n=pl.len(), ok=(pl.col("parse_status") == "ok").sum(),
        mean=pl.col("value").filter(pl.col("parse_status") == "ok").mean(),
        perfect=(pl.col("perfect").filter(pl.col("parse_status") == "ok")).cast(pl.Float64).mean())
    assert {(t, v): n for t, v, n in cells.select("task", "set", "n").iter_rows()} == CELLS
    for c in cells.iter_rows(named=True):
        rows = {r["metric"]: r for r in tasks.filter(pl.col("task") == c["task"], pl.col("length") == c["set"]).to_dicts()}
        assert rows[SCORING_SUCCESS]["score"] == pytest.approx(c["ok"] / c["n"]) and rows[SCORING_SUCCESS]["n"] == c["n"]
        if c["ok"]:
            assert rows[JUDGE]["score"] == pytest.approx(c["mean"]) and rows[JUDGE]["n"] == c["ok"]
            assert rows[PERFECT_RATE]["score"] == pytest.approx(c["perfect"])
    overall = table.filter(pl.col("level") == "overall", pl.col("metric") == SCORING_SUCCESS)
    per_set = overall.filter(pl.col("length") != ALL_LENGTHS)
    assert sorted(per_set["length"]) == sorted(SETS) and per_set["n"].sum() == 3
    # Table 3 and the overall over all items (headline across_lengths: micro_over_items): every verdict once
    [everything] = overall.filter(pl.col("length") == ALL_LENGTHS).to_dicts()
    assert everything["n"] == 3 and everything["score"] == pytest.approx(judged["parse_status"].eq("ok").mean())
    # each [all] row (every task, and the overall) is micro over its items: the verdicts themselves, not set means
    at_all = table.filter(pl.col("length") == ALL_LENGTHS)
    assert set(at_all.filter(pl.col("level") == "task")["task"]) == set(TASKS)
    for task in [None, *TASKS]:
        group = judged if task is None else judged.filter(pl.col("task") == task)
        cell = at_all.filter(pl.col("level") == "overall") if task is None else at_all.filter(
            pl.col("level") == "task", pl.col("task") == task)
        rows = {r["metric"]: r for r in cell.to_dicts()}
        read = group.filter(pl.col("parse_status") == "ok")
        assert rows[SCORING_SUCCESS]["n"] == group.height
        assert rows[SCORING_SUCCESS]["score"] == pytest.approx(read.height / group.height)
        if read.height:
            assert rows[JUDGE]["score"] == pytest.approx(read["value"].mean()) and rows[JUDGE]["n"] == read.height
            assert rows[PERFECT_RATE]["score"] == pytest.approx(read["perfect"].cast(pl.Float64).mean())
    with capfd.disabled():
        print("\nLoong task x set (SmolLM2 judged by SmolLM2):")
        print(tasks.select("task", "length", "metric", "score", "n").sort("task", "length", "metric"))
