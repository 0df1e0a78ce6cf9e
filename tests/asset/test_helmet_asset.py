"""HELMET RAG in the pipeline: instances at 8k and 16k built from the demo corpus with dense-retrieval
hard negatives, their gold passage at the 6 depths verified by the blocking asset check."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline.definitions import build_pipeline
from lc_pipeline.runner import Runner

pytestmark = pytest.mark.slow

CONFIG = {
    "name": "helmet-rag",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 80, "seed": 3}],  # ~180 passages: 16k takes ~110
    "lengths": ["8k", "16k"],
    "base_lengths": ["8k"],
    "long_lengths": ["16k"],
    "items_per_length": 0,  # HELMET only
    "retrieval_top_k": 260,
    "hard_negatives_per_item": 160,  # 16k holds ~110 passages
    "helmet": {"tasks": ["rag"], "n_per_task": 2},
}


def check_evaluations(instance: dg.DagsterInstance, check_name: str) -> dict[str | None, dg.AssetCheckEvaluation]:
    """The evaluations of one asset check by partition, as the runs recorded them."""
    found = {}
    for run in instance.get_runs():
        for rec in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            evaluation = rec.dagster_event.event_specific_data
            if evaluation.check_name == check_name:
                found[run.tags.get("dagster/partition")] = evaluation
    return found


def test_rag_instances_at_8k_and_16k_pass_the_depth_check(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    settings = settings_for(tmp_path, tmp_path / "c.yaml")
    with dg.instance_for_test() as instance:
        pipeline = build_pipeline(settings)
        Runner(pipeline, instance, echo=lambda m: None).run(models=[])  # raises if a blocking check fails
        index_meta = instance.get_latest_materialization_event(dg.AssetKey("passage_index")).asset_materialization
        assert index_meta.metadata["index_kind"].value == "exact"  # a few hundred passages: no ANN needed

        # The check ran with each level's instances; its verdicts are in the run records.
        checks = check_evaluations(instance, "helmet_rag_gold_at_depths")
        for level, target in (("8k", 8192), ("16k", 16384)):
            check = checks[level]
            assert check.passed and check.metadata["rag_instances"].value == 2 * 6
            rows = pl.read_parquet(settings.lake_dir / "instances" / f"length={level}" / "data.parquet")
            assert set(rows["suite"]) == {"helmet"} and sorted(set(rows["depth"])) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
            assert ((rows["input_tokens"] <= target) & (rows["input_tokens"] >= 0.95 * target)).all()
            # ~130-token passages, less two 3-passage demonstrations: ~47 at 8k, ~100 at 16k.
            assert (rows["n_hard_negatives"] > (40 if level == "8k" else 90)).all()
