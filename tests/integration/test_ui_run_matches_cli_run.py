"""Issue 32 (acceptance 2): a run started from the UI's GraphQL and the same run from `lcp run` materialize the same
asset partitions and write the same tables.

A benchmark run as released over three invented LongBench records (qasper), with imported predictions (no model is
called): `lcp run --model first`; then, on the same project with its tables and Dagster storage removed (the
imported predictions kept: their path is the model's id), `lcp ui` (the webserver and its daemon, on 127.0.0.1) and one asset backfill of the partitions `lcp run` materialized, launched through
GraphQL as the UI's "Materialize" does, executed by the daemon in the graph's order. The daemon's backfill loop
wakes every 2 s instead of every 30 s (tests/daemon_tick/sitecustomize.py): the backfill advances one level of the
graph per wake-up, and Dagster's interval is not configurable. The run queue, which each of those levels' runs
passes through, is polled every second instead of every 5 s (the UI instance's dagster.yaml:
``dequeue_interval_seconds``, Dagster's setting for it); neither changes what runs or what it writes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from click.testing import CliRunner
from conftest import free_port, released_longbench_project
from ui_process import DEQUEUE_EVERY_SECOND, serving, start_ui, stop_ui

from lc_pipeline.cli import main
from lc_pipeline.partitions import SOURCE_DIM
from lc_pipeline.runner import _graphql, wait_for_backfill

DAEMON_TICK = Path(__file__).resolve().parents[1] / "daemon_tick"  # sitecustomize: the backfill daemon's 2-s interval
IDS = ["q-1", "q-2", "q-3"]
MODEL = "first"
RECORDS = [{"dataset": "qasper", "_id": rid, "language": "en", "context": f"The paper {rid} studies parsing.",
            "input": "What is studied?", "answers": ["parsing"], "all_classes": None} for rid in IDS]
# What differs between two runs of the same work: when it ran and how long it took.
RUN_COLUMNS = {"latency_s", "created_at", "generated_at", "started_at", "finished_at", "seconds"}

LAUNCH_ALL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
  }
}
"""


def lcp(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def project(root: Path, monkeypatch) -> Path:
    """A released LongBench project with the model ``first``'s predictions imported; its environment is set."""
    released_longbench_project(root, monkeypatch, RECORDS)
    preds = root / f"{MODEL}.jsonl"
    preds.write_text("".join(json.dumps({"_id": r, "prediction": f"{r} studies parsing"}) + "\n" for r in IDS))
    lcp("models", "import", str(preds), "--model", MODEL, "--config", str(root / "lb.yaml"))
    return root


def materialized(home: Path) -> set[tuple[str, str | None]]:
    """(asset, partition) of every materialization the Dagster instance under ``home`` recorded."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        out = set()
        for key in instance.get_asset_keys():
            for record in instance.fetch_materializations(key, limit=1000).records:
                out.add((key.to_user_string(), record.asset_materialization.partition))
        return out


def tables(lake: Path) -> dict[str, pl.DataFrame]:
    """Every Parquet partition of the lake's tables (not the stores or caches), by path, without run timings."""
    out = {}
    for path in sorted(lake.rglob("*.parquet")):
        rel = path.relative_to(lake).as_posix()
        if rel.startswith(("_", "imports/")) or "/_" in rel:
            continue
        frame = pl.read_parquet(path)
        out[rel] = frame.drop([c for c in frame.columns if c in RUN_COLUMNS])
    return out


@pytest.mark.slow
def test_a_run_from_the_ui_graphql_materializes_what_lcp_run_does(tmp_path, monkeypatch):
    cli_root = project(tmp_path / "cli", monkeypatch)
    out = lcp("run", "--model", MODEL)
    assert "longbench/en" in out  # the leaderboard, printed
    by_cli, by_cli_tables = materialized(cli_root / ".dagster"), tables(cli_root / "lake")
    assert {a for a, _ in by_cli} >= {"source_items", "instances", "generations", "metric_scores", "benchmark_scores",
                                      "leaderboard"}

    ui_root = cli_root  # the same project again, as if nothing had run: only the imported predictions are kept
    shutil.rmtree(ui_root / ".dagster")
    (ui_root / ".dagster").mkdir()
    for entry in (ui_root / "lake").iterdir():
        if entry.name != "imports":
            shutil.rmtree(entry)
    with dg.DagsterInstance.from_config(str(ui_root / ".dagster")) as instance:
        instance.add_dynamic_partitions(SOURCE_DIM, ["longbench"])  # the UI's "add partition" (lcp run adds it)
    # The default run queue, polled every second instead of every 5 s: each level of the backfill waits on it once.
    (ui_root / ".dagster" / "dagster.yaml").write_text(DEQUEUE_EVERY_SECOND)
    port, log = free_port(), tmp_path / "ui.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(DAEMON_TICK), os.environ.get("PYTHONPATH")]))}
    proc = start_ui(["ui", "--port", str(port)], ui_root, env, log)
    try:
        serving(port, proc, log, start_s=300)
        url = f"http://127.0.0.1:{port}"
        # The assets and partitions lcp run chose (the UI's selection of them; the registry's other models, whose
        # partitions the UI also lists, are not part of this run).
        chosen: dict[str, list[str]] = {}
        for asset, partition in sorted(by_cli, key=str):
            chosen.setdefault(asset, []).extend([partition] if partition else [])
        params = {"partitionsByAssets": [
            {"assetKey": {"path": [asset]},
             "partitions": {"ranges": [{"start": p, "end": p} for p in keys]} if keys else None}
            for asset, keys in chosen.items()], "title": "materialize", "tags": []}
        launched = _graphql(url, LAUNCH_ALL, {"params": params})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        final = wait_for_backfill(url, launched["backfillId"], timeout_s=900, echo=lambda m: None)
        assert final["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), final
    finally:
        stop_ui(proc)

    assert materialized(ui_root / ".dagster") == by_cli  # the same assets and partitions, once each way
    by_ui_tables = tables(ui_root / "lake")
    assert set(by_ui_tables) == set(by_cli_tables)
    for path, frame in by_cli_tables.items():
        assert by_ui_tables[path].equals(frame), path
