"""Issue 31: a stored table is reused only when the same inputs built it (config, code and input data), and a lake
never crosses two configs (acceptance 2, second half; probe D5; the newcomer report's "changed data").

- Records removed from (and one edited in) a released config's data folder: the next run rebuilds the sources and
  the instances, asks only the new prompt (counted: the generations materialization's ``generated``), scores
  exactly the current records, and the leaderboard shows those only; ``lcp plan`` said the same count first.
- The D5 reproductions: predictions for config B imported into a lake where config A's model is scored are refused
  naming A (not "imported" against A's ids), and so are B's backfill and ``lcp demo --config B`` (nothing of A's is
  replaced); with A's instances unscored, B's import reads B's own records and B's backfill runs on B's instances.

The records are small invented LongBench ones (qasper), run as released, with imported predictions (a lookup, no
model weights: what is counted is what the pipeline asks its model for).
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from click.testing import CliRunner
from conftest import released_longbench_project

from lc_pipeline.cli import main

IDS = [f"q-{i}" for i in range(1, 6)]


def record(rid: str, question: str = "What is studied?") -> dict:
    return {"dataset": "qasper", "_id": rid, "language": "en", "context": f"The paper {rid} studies parsing.",
            "input": question, "answers": ["parsing"], "all_classes": None}


def write_records(project: Path, records: list[dict]) -> None:
    (project / "data" / "longbench" / "qasper.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    return released_longbench_project(tmp_path, monkeypatch, [record(r) for r in IDS])


def lcp(*args: str, ok: bool = True):
    result = CliRunner().invoke(main, list(args))
    if ok:
        assert result.exit_code == 0, result.output + repr(result.exception)
    return result


def import_predictions(project: Path, model: str, ids: list[str], config: str | None = None):
    preds = project / f"{model}.jsonl"
    preds.write_text("".join(json.dumps({"_id": r, "prediction": "parsing"}) + "\n" for r in ids))
    return lcp("models", "import", str(preds), "--model", model, "--config", config or str(project / "lb.yaml"),
               ok=False)


def latest(asset: str, partition: str | None = None) -> dg.EventLogRecord:
    with dg.DagsterInstance.get() as instance:
        records = instance.fetch_materializations(dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(asset), asset_partitions=[partition] if partition else None), limit=1).records
    assert records, f"{asset} [{partition}] was never materialized"
    return records[0]


def meta(record: dg.EventLogRecord, key: str):
    value = record.asset_materialization.metadata[key]
    return getattr(value, "value", value)


def table(project: Path, *parts: str) -> pl.DataFrame:
    return pl.read_parquet(project.joinpath("lake", *parts, "data.parquet"))


def board_en(project: Path) -> pl.DataFrame:
    """The leaderboard's LongBench English table rows (the records are English qasper ones)."""
    return table(project, "leaderboard").filter(pl.col("metric") == "longbench/en")


def test_removed_and_edited_records_rebuild_instances_and_only_the_new_prompt_is_generated(project):
    config = str(project / "lb.yaml")
    assert import_predictions(project, "ref", IDS).exit_code == 0
    first = lcp("backfill", "--model", "ref", "--config", config).output
    assert "> instances [all]" in first
    generations = latest("generations", "all|ref")
    assert meta(generations, "generated") == 5
    assert board_en(project)["n_instances"].to_list() == [5]

    # Two records removed, one edited (same id, another question): the data changed, the config did not.
    write_records(project, [record("q-1"), record("q-2", "Which topic does the paper study?"), record("q-3")])
    planned = lcp("plan", "--model", "ref", "--config", config, "--format", "json")
    assert "are not in the lake or are stale: building them first" in planned.output
    assert "> sources [longbench]" in planned.output and "> instances [all]" in planned.output  # rebuilt
    cells = json.loads(planned.stdout)["models"][0]["cells"]
    assert sum(c["to_generate"] for c in cells) == 1 and sum(c["reused"] for c in cells) == 2

    second = lcp("backfill", "--model", "ref", "--config", config).output
    assert "= generations + metric_scores [all|ref]: up to date, reused" not in second
    again = latest("generations", "all|ref")
    assert again.run_id != generations.run_id
    assert meta(again, "generated") == 1 and meta(again, "reused_from_store") == 2  # what plan said
    current = set(table(project, "instances", "length=all")["instance_id"])
    assert len(current) == 3
    assert set(table(project, "generations", "length=all", "model=ref")["instance_id"]) == current
    assert set(table(project, "metric_scores", "length=all", "model=ref")["instance_id"]) == current
    board = board_en(project)
    assert board["n_instances"].to_list() == [3] and board["n_unpaired"].to_list() == [0]
    assert len(meta(latest("source_items", "longbench"), "input_sha256")) == 64  # the data's content, recorded

    # Nothing changed since: every step is reused, nothing is generated, and plan says 0 to generate.
    third = lcp("backfill", "--model", "ref", "--config", config).output
    assert "= generations + metric_scores [all|ref]: up to date, reused" in third
    assert latest("generations", "all|ref").run_id == again.run_id
    cells = json.loads(lcp("plan", "--model", "ref", "--config", config, "--format", "json").stdout)["models"][0][
        "cells"]
    assert sum(c["to_generate"] for c in cells) == 0


def test_the_same_records_under_another_data_folder_are_reused_and_other_records_are_not(project, monkeypatch):
    config = str(project / "lb.yaml")
    assert import_predictions(project, "ref", IDS).exit_code == 0
    lcp("backfill", "--model", "ref", "--config", config)
    built = latest("instances", "all").run_id

    elsewhere = project / "elsewhere" / "longbench"
    elsewhere.mkdir(parents=True)
    (elsewhere / "qasper.jsonl").write_bytes((project / "data" / "longbench" / "qasper.jsonl").read_bytes())
    monkeypatch.setenv("LCP_DATA", str(project / "elsewhere"))
    out = lcp("backfill", "--model", "ref", "--config", config).output
    assert "= generations + metric_scores [all|ref]: up to date, reused" in out  # the same content: nothing rebuilt
    assert latest("instances", "all").run_id == built

    (elsewhere / "qasper.jsonl").write_text("".join(json.dumps(record(r)) + "\n" for r in IDS[:2]))
    lcp("backfill", "--model", "ref", "--config", config)
    assert latest("instances", "all").run_id != built
    assert table(project, "instances", "length=all").height == 2
    assert board_en(project)["n_instances"].to_list() == [2]


def other_config(project: Path) -> Path:
    """Config B: LongBench as released too, the same level label ``all``, its own data folder (other records)."""
    data = project / "data_b" / "longbench"
    data.mkdir(parents=True)
    (data / "qasper.jsonl").write_text("".join(json.dumps(record(f"b-{i}")) + "\n" for i in range(3)))
    path = project / "b.yaml"
    path.write_text(yaml.safe_dump({"name": "lb-b", "sources": [{"name": "longbench", "kind": "longbench",
                                                                 "paths": str(data)}],
                                    "released": {"benchmark": "longbench"}, "lengths": ["all"]}))
    return path


def test_another_configs_scored_lake_is_refused_naming_it_by_import_backfill_and_demo(project):
    config_a = str(project / "lb.yaml")
    assert import_predictions(project, "ref", IDS).exit_code == 0
    lcp("backfill", "--model", "ref", "--config", config_a)
    config_b = str(other_config(project))
    lake = project / "lake"
    before = {p: p.read_bytes() for p in lake.rglob("*") if p.is_file() and "_checkpoints" not in p.parts
              and p.name != "lake.duckdb"}

    imported = import_predictions(project, "v2x", ["b-0", "b-1", "b-2"], config=config_b)
    assert imported.exit_code != 0 and "imported" not in imported.output.replace("nothing was imported", "")
    # --url: refused here, before any server is asked (nothing listens on port 9 of the loopback).
    for refused in (imported, lcp("backfill", "--model", "ref", "--config", config_b, ok=False),
                    lcp("backfill", "--model", "ref", "--config", config_b, "--url", "http://127.0.0.1:9", ok=False),
                    lcp("run", "--config", config_b, "--model", "ref", ok=False)):
        assert refused.exit_code == 1, refused.output
        assert "were built by config 'lb'" in refused.output and "config 'lb-b'" in refused.output
        assert "LCP_LAKE" in refused.output and "Traceback" not in refused.output
    after = {p: p.read_bytes() for p in lake.rglob("*") if p.is_file() and "_checkpoints" not in p.parts
             and p.name != "lake.duckdb"}
    assert after == before  # nothing of A's was replaced or orphaned

    # A's own backfill still runs on A's instances, up to date.
    out = lcp("backfill", "--model", "ref", "--config", config_a).output
    assert "= generations + metric_scores [all|ref]: up to date, reused" in out


def test_another_configs_unscored_instances_are_not_read_and_are_rebuilt_for_this_config(project):
    lcp("plan", "--config", str(project / "lb.yaml"), "--model", "smollm2-135m")  # A's instances, no model run
    config_b = str(other_config(project))
    imported = import_predictions(project, "v2x", ["b-0", "b-1", "b-2"], config=config_b)
    assert imported.exit_code == 0, imported.output
    assert "3 predictions imported" in imported.output and "read from its sources" in imported.output
    out = lcp("backfill", "--model", "v2x", "--config", config_b).output
    assert "> instances [all]" in out
    assert sorted(table(project, "instances", "length=all")["record_id"]) == ["b-0", "b-1", "b-2"]
    assert set(table(project, "metric_scores", "length=all", "model=v2x")["instance_id"]) == set(
        table(project, "instances", "length=all")["instance_id"])


def test_the_released_leaderboard_pairs_models_on_their_common_instances(project):
    """The newcomer's case: one model scored while the data had 3 of the 5 records, another on all 5. Each row is
    computed on the 3 common instances; n_unpaired counts the other model's 2 (was: 3 vs 5 instances, 0 and 0)."""
    config = str(project / "lb.yaml")
    write_records(project, [record(r) for r in IDS[:3]])
    assert import_predictions(project, "few", IDS[:3]).exit_code == 0
    lcp("backfill", "--model", "few", "--config", config)
    write_records(project, [record(r) for r in IDS])
    assert import_predictions(project, "every", IDS).exit_code == 0
    out = lcp("backfill", "--model", "every", "--config", config).output
    board = board_en(project).sort("model")
    assert board.select("model", "n_instances", "n_unpaired").rows() == [("every", 3, 2), ("few", 3, 0)]
    assert "every" in out and "few" in out
    # The stored tables keep each model's own instances; only the board pairs them.
    own = pl.read_parquet(project / "lake" / "benchmark_scores" / "model=every" / "data.parquet")
    assert own.filter((pl.col("level") == "overall") & (pl.col("table") == "en"))["n"].to_list() == [5]
