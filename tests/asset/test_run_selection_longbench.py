"""`lcp run --config longbench --tasks hotpotqa,trec --limit 5 --model M` runs just that (issue 32 acceptance 1): on
the shared LongBench records as ``$LCP_DATA/longbench/``, with their reference predictions imported as model
``reference``, the run builds 5 instances of each of the two tasks and no other, generates and scores those 10,
and a second run reuses every step."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.resources.parquet_io import read_table
from shared_files import SHARED_DATA, skip_unless

pytestmark = [pytest.mark.slow, skip_unless(SHARED_DATA / "longbench", "the shared LongBench records")]


def lcp(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def test_lcp_run_with_tasks_and_limit_builds_generates_and_scores_just_those(tmp_path, monkeypatch):
    for var, value in {"LCP_LAKE": tmp_path / "lake", "LCP_MODELS": tmp_path / "models.yaml", "LCP_DATA": SHARED_DATA,
                       "DAGSTER_HOME": tmp_path / ".dagster", "LCP_PROJECT_DIR": tmp_path}.items():
        monkeypatch.setenv(var, str(value))
    records = [json.loads(line) for f in sorted((SHARED_DATA / "longbench").glob("*.jsonl"))
               for line in f.read_text().splitlines()]
    preds = tmp_path / "reference.jsonl"
    preds.write_text("".join(json.dumps({"_id": r["_id"], "prediction": r["reference_prediction"]}) + "\n"
                             for r in records))
    lcp("models", "import", str(preds), "--model", "reference", "--config", "longbench")

    run = ("run", "--config", "longbench", "--tasks", "hotpotqa,trec", "--limit", "5", "--model", "reference")
    out = lcp(*run)
    lake = tmp_path / "lake"
    instances = read_table(lake / "instances")
    assert dict(instances.group_by("task").len().iter_rows()) == {"hotpotqa": 5, "trec": 5}
    first_ids = {task: [r["_id"] for r in records if r["dataset"] == task][:5] for task in ("hotpotqa", "trec")}
    assert sorted(instances["record_id"]) == sorted(first_ids["hotpotqa"] + first_ids["trec"])  # the first five
    generations = read_table(lake / "generations")
    assert generations.height == 10 and set(generations["model"]) == {"reference"}
    scores = read_table(lake / "benchmark_scores").filter(pl.col("level") == "task")
    scored = scores.filter(pl.col("score").is_not_null())
    assert dict(scored.select("task", "n").iter_rows()) == {"hotpotqa": 5, "trec": 5}
    assert "longbench/en" in out  # the leaderboard is printed

    again = lcp(*run)
    assert "generations + metric_scores [all|reference] ..." not in again and "up to date, reused" in again
    assert read_table(lake / "generations").equals(generations)
