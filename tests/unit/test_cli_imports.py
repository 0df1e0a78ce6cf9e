"""Commands that do not run the graph import neither Dagster nor torch (issue 29, "Fixed costs").

Each command runs in a fresh interpreter through the ``lcp`` console script's own entry point (looked up in
the installed package's metadata, as the script does), with ``standalone_mode=False`` so that the interpreter
is still there afterwards to list ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

HEAVY = ("dagster", "torch", "transformers")

# Runs `lcp <args>` as the console script does, then prints the top-level modules loaded on the last line.
RUN_ENTRY_POINT = """
import json, sys
from importlib.metadata import entry_points

(lcp,) = entry_points(group="console_scripts", name="lcp")
try:
    lcp.load()(sys.argv[1:], prog_name="lcp", standalone_mode=False)
finally:
    print("\\n" + json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def run_lcp(args: list[str], tmp_path: Path, fails_with: str | None = None) -> tuple[str, set[str]]:
    """``lcp <args>``'s stdout and the top-level modules loaded; with ``fails_with``, the command must fail
    with that message (a ClickException: standalone_mode=False raises it instead of printing it)."""
    env = {**os.environ, "LCP_PROJECT_DIR": str(tmp_path), "LCP_LAKE": str(tmp_path / "data_lake"),
           "LCP_MODELS": str(tmp_path / "models.yaml"), "DAGSTER_HOME": str(tmp_path / ".dagster")}
    done = subprocess.run([sys.executable, "-c", RUN_ENTRY_POINT, *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    if fails_with is None:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 1 and f"click.exceptions.ClickException: {fails_with}" in done.stderr, done.stderr
    output, _, modules = done.stdout.rstrip("\n").rpartition("\n")
    return output, set(json.loads(modules))


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    part = tmp_path / "data_lake" / "benchmark_scores" / "model=m1"
    part.mkdir(parents=True)
    pl.DataFrame({"task": ["qasper", "trec"], "level": ["task", "task"], "score": [12.5, 40.0]}) \
      .write_parquet(part / "data.parquet")
    return tmp_path / "data_lake"


def test_query_imports_no_dagster_or_torch(lake: Path, tmp_path: Path):
    out, modules = run_lcp(["results", "query", "select model, task, score from benchmark_scores order by task",
                            "--format", "csv"], tmp_path)
    assert out.splitlines() == ["model,task,score", "m1,qasper,12.5", "m1,trec,40.0"]
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))
    assert "polars" not in modules  # DuckDB alone answers a query


def test_query_select_1_imports_no_dagster_or_torch(lake: Path, tmp_path: Path):
    out, modules = run_lcp(["results", "query", "select 1 as one", "--format", "json"], tmp_path)
    assert json.loads(out) == [{"one": 1}]
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_tasks_list_imports_no_dagster_or_torch(tmp_path: Path):
    out, modules = run_lcp(["tasks", "list", "--format", "json"], tmp_path)
    assert "longbench/qasper" in {t["qualified_name"] for t in json.loads(out)}
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_models_imports_no_dagster_or_torch(tmp_path: Path):
    out, modules = run_lcp(["models", "list"], tmp_path)
    assert "smollm2-135m" in out
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_score_imports_no_dagster_or_torch(tmp_path: Path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"_id": "a", "prediction": "Paris", "answers": ["Paris"]}) + "\n")
    out, modules = run_lcp(["tools", "score", str(preds), "--metric", "longbench:hotpotqa"], tmp_path)
    assert json.loads(out) == {"_id": "a", "score": 1.0}
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_help_lists_every_command_without_dagster_or_torch(tmp_path: Path):
    from lc_pipeline.cli import LAZY_COMMANDS, main

    out, modules = run_lcp(["--help"], tmp_path)
    commands = out.split("Commands:")[1].split("Environment variables")[0]
    listed = {line.split()[0] for line in commands.splitlines() if line.strip() and not line.endswith(":")}
    assert listed == set(main.commands) | set(LAZY_COMMANDS)
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_longscore_imports_no_dagster_or_torch(tmp_path: Path):
    scores = tmp_path / "scores.csv"
    scores.write_text("task,model,length,score\nqa,m1,2k,50\nqa,m1,8k,40\nqa,m2,2k,60\nqa,m2,8k,30\n")
    out, modules = run_lcp(["tools", "longscore", "--scores", str(scores), "--base-lengths", "2k",
                            "--long-lengths", "8k", "--format", "json"], tmp_path)
    assert {row["model"] for row in json.loads(out)["models"]} == {"m1", "m2"}
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_compare_reads_the_lake_without_dagster_or_torch(tmp_path: Path):
    """Up to the lake's metric_scores (which this lake lacks): every module compare uses is imported by then."""
    part = tmp_path / "data_lake" / "instances" / "length=1k"
    part.mkdir(parents=True)
    pl.DataFrame({"instance_id": ["i1"], "benchmark": ["qa"], "task": ["qa"]}).write_parquet(part / "data.parquet")
    _, modules = run_lcp(["results", "compare", "m1", "m2"], tmp_path,
                         fails_with="model 'm1' has no metric_scores partition")
    assert {"polars", "lc_pipeline"} <= modules
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_import_predictions_into_a_project_without_dagster_storage_imports_no_dagster_or_torch(tmp_path: Path):
    """Nothing has opened the instance yet: the model's partition waits for `lcp backfill` / `lcp ui` (issue 29)."""
    data = tmp_path / "data" / "longbench"
    data.mkdir(parents=True)
    (data / "qasper.jsonl").write_text(json.dumps(
        {"dataset": "qasper", "_id": "q-1", "language": "en", "context": "The paper studies parsing.",
         "input": "What is studied?", "answers": ["parsing"], "all_classes": None}) + "\n")
    (tmp_path / "lb.yaml").write_text(json.dumps(
        {"name": "lb", "sources": [{"name": "longbench", "kind": "longbench", "paths": str(data)}],
         "released": {"benchmark": "longbench"}, "lengths": ["all"]}))
    (tmp_path / "preds.jsonl").write_text(json.dumps({"_id": "q-1", "prediction": "parsing"}) + "\n")
    output, modules = run_lcp(["models", "import", str(tmp_path / "preds.jsonl"), "--model", "elsewhere",
                               "--config", str(tmp_path / "lb.yaml")], tmp_path)
    assert "1 predictions imported" in output
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))
    assert not (tmp_path / ".dagster" / "history").exists()
