"""Issue 29, fewer fixed costs around a backfill of imported predictions, with what users see kept:

- `lcp import-predictions` into a project whose Dagster storage does not exist yet opens no instance; the model's
  partition appears with the `lcp backfill` (or `lcp ui`) that creates the storage; into a project whose storage
  exists (a UI may be running), the import adds it at once;
- in a benchmark run as released, the leaderboard is materialized in the same Dagster run as the model's
  benchmark_scores (after it, with its own materialization and metadata), and alone when those are reused.

The records are small invented LongBench ones (qasper), run as released, as in tests/unit/test_imported_predictions.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner
from conftest import released_longbench_project

from lc_pipeline.cli import _prepare_ui_instance, main
from lc_pipeline.commands.imports import imported_model_slugs, instance_storage_exists
from lc_pipeline.dagster_instance import LOCK_NAME
from lc_pipeline.partitions import MODEL_DIM
from lc_pipeline.settings import Settings, cli_settings

IDS = ["q-1", "q-2", "q-3"]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    return released_longbench_project(tmp_path, monkeypatch, [
        {"dataset": "qasper", "_id": rid, "language": "en", "context": f"The paper {rid} studies parsing.",
         "input": "What is studied?", "answers": ["parsing"], "all_classes": None} for rid in IDS])


def lcp(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def import_predictions(project: Path, model: str) -> str:
    preds = project / f"{model}.jsonl"
    preds.write_text("".join(json.dumps({"_id": r, "prediction": f"{model} says parsing"}) + "\n" for r in IDS))
    return lcp("models", "import", str(preds), "--model", model, "--config", str(project / "lb.yaml"))


def latest(instance: dg.DagsterInstance, asset: str, partition: str | None = None) -> dg.EventLogRecord:
    records = instance.fetch_materializations(dg.AssetRecordsFilter(
        asset_key=dg.AssetKey(asset), asset_partitions=[partition] if partition else None), limit=1).records
    assert records, f"{asset} [{partition}] was never materialized"
    return records[0]


def test_imports_leave_the_partition_to_the_first_backfill_and_the_leaderboard_rides_in_the_model_run(project):
    home = project / ".dagster"
    assert "3 predictions imported" in import_predictions(project, "first")
    assert not instance_storage_exists(home)  # nothing opened the instance: no UI can list partitions yet
    out = lcp("backfill", "--model", "first", "--config", str(project / "lb.yaml"))
    assert "benchmark_scores [first] + leaderboard" in out and "longbench/en" in out
    assert instance_storage_exists(home)

    with dg.DagsterInstance.get() as instance:
        assert instance.get_dynamic_partitions(MODEL_DIM) == ["first"]
        scores, board = latest(instance, "benchmark_scores", "first"), latest(instance, "leaderboard")
        assert board.run_id == scores.run_id  # one run: benchmark_scores, then the leaderboard
        assert board.asset_materialization.metadata["models"].value == 1
        assert board.storage_id > scores.storage_id

        # The storage exists now (a UI may be running): the next import adds its partition at once.
        import_predictions(project, "second")
        assert set(instance.get_dynamic_partitions(MODEL_DIM)) == {"first", "second"}

        # Reused benchmark_scores: the leaderboard runs alone and still ranks every model.
        out = lcp("backfill", "--model", "first", "--config", str(project / "lb.yaml"))
        assert "benchmark_scores [first]: up to date, reused" in out
        again = latest(instance, "leaderboard")
        assert again.run_id != board.run_id and again.run_id != latest(instance, "benchmark_scores", "first").run_id


def test_lcp_ui_adds_the_partitions_of_imported_models_before_the_ui_lists_them(project):
    import_predictions(project, "early")
    assert not instance_storage_exists(project / ".dagster")
    assert imported_model_slugs(project / "models.yaml") == ["early"]
    _prepare_ui_instance(Settings.from_env())  # what `lcp ui` does before starting dagster dev
    with dg.DagsterInstance.get() as instance:
        assert instance.get_dynamic_partitions(MODEL_DIM) == ["early"]


def test_lcp_ui_creates_a_new_homes_storage_under_lcps_lock_before_dagster_dev_starts(project):
    """No imported model: ``lcp ui`` still creates the storage itself, holding the instance lock that every lcp
    command takes (lc_pipeline/dagster_instance.py), so that ``dagster dev`` never races another lcp command to
    create it; an existing storage is left to dagster dev."""
    home = project / ".dagster"
    assert not instance_storage_exists(home) and imported_model_slugs(project / "models.yaml") == []
    _prepare_ui_instance(cli_settings(None))  # lcp ui's settings (they make the home folder), then this
    assert instance_storage_exists(home) and (home / LOCK_NAME).exists()


def test_a_dagster_yaml_with_its_own_storage_counts_as_an_existing_instance(tmp_path):
    home = tmp_path / ".dagster"
    home.mkdir()
    assert not instance_storage_exists(home)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert not instance_storage_exists(home)
    (home / "dagster.yaml").write_text("storage:\n  postgres:\n    postgres_url: postgresql://db/dagster\n")
    assert instance_storage_exists(home)
