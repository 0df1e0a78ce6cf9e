"""The packaged ``minilongbench`` config materialized in process on the shared data (issue 18, acceptance 5):
``instances`` hold only the subset's records of the released LongBench, and ``minilongbench_estimates``
turns a model's ``metric_scores`` of them into its full-LongBench estimate.

The shared LongBench files hold 136 of the subset's 237 records (12 of the 21 tasks, each file exactly that
task's subset records); the model is OLMo-1B, one of the 20 real LLMs, held out of the IRT fit, whose
released per-sample scores stand in for scoring its generations (a generation run of 136 long prompts
does not fit a test). Its sample of each record is derived here from the record's id and the paper's
Appendix A table, independently of benchmarks/minilongbench/subset.py.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline.benchmarks import minilongbench as mlbm
from lc_pipeline.benchmarks.minilongbench.subset import OFFSETS, RELEASED_SUBSET
from lc_pipeline.config import PACKAGED_CONFIGS
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.partitions import MODEL_DIM, SOURCE_DIM
from lc_pipeline.resources.parquet_io import (
    partition_path,
    read_table,
    write_parquet_atomic,
)

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
HELD_OUT, SLUG = "OLMo-1B", "olmo-1b"

pytestmark = pytest.mark.skipif(not (SHARED / "minilongbench" / "scores_train_models.parquet").exists()
                                or not (SHARED / "longbench").is_dir(), reason="shared data absent")


def materialize(pipeline, instance, assets: list[str], partition: str | None = None):
    return dg.materialize(pipeline.assets, selection=assets, partition_key=partition, resources=pipeline.resources,
                          instance=instance)


def test_the_minilongbench_config_runs_the_subsets_records_and_estimates_a_model(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_DATA", str(SHARED))
    scores = pl.read_parquet(SHARED / "minilongbench" / "scores_train_models.parquet")
    scores.filter(pl.col("model") != HELD_OUT).write_parquet(tmp_path / "train.parquet")
    raw = yaml.safe_load((PACKAGED_CONFIGS / "minilongbench.yaml").read_text())
    assert raw["released"]["subset"] == "minilongbench"
    # The packaged config, with the training matrix less the held-out LLM and a short fit.
    raw["minilongbench"].update(scores="train.parquet", epochs=100, baseline_draws=0, validation_splits=1,
                                validation_draws=3)
    (tmp_path / "minilongbench.yaml").write_text(yaml.safe_dump(raw))
    settings = settings_for(tmp_path, tmp_path / "minilongbench.yaml")
    pipeline = build_pipeline(settings)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(SOURCE_DIM, ["longbench"])
        assert materialize(pipeline, instance, ["source_documents", "source_items", "rejected_records"],
                           "longbench").success
        assert materialize(pipeline, instance, ["instances"], "all").success
        instances = read_table(settings.lake_dir / "instances")
        assert instances.height == 136 and set(instances["suite"]) == {"released"}

        # OLMo-1B's released score on each instance's sample, as metric_scores of its generations.
        def sample(record_id: str) -> int:
            task, _, i = record_id.rpartition("-")
            return OFFSETS[task] + sorted(RELEASED_SUBSET[task])[int(i)]

        truth_of = dict(scores.filter(pl.col("model") == HELD_OUT).select("global_sample", "score").iter_rows())
        observed = {sample(r): truth_of[sample(r)] for r in instances["record_id"].to_list()}
        write_parquet_atomic(
            instances.select("instance_id", "item_id", "task", "category", "depth").with_columns(
                pl.lit("longbench.metric").alias("metric"),
                pl.Series("score", [truth_of[sample(r)] for r in instances["record_id"].to_list()]),
            ),
            partition_path(settings.lake_dir, "metric_scores", {"length": "all", MODEL_DIM: SLUG}),
        )
        instance.add_dynamic_partitions(MODEL_DIM, [SLUG])
        assert materialize(pipeline, instance, ["minilongbench_subset"]).success
        subset = pl.read_parquet(partition_path(settings.lake_dir, "minilongbench_subset", {}))
        assert subset.height == 237  # the released subset, not a K-Means one
        sub_meta = instance.get_latest_materialization_event(
            dg.AssetKey("minilongbench_subset")).asset_materialization.metadata
        # The given subset validated on held-out training models too: one unit per split, no K-Means.
        assert "x 1 K-Means seed(s)" in sub_meta["validation"].value and "validation_spearman_predict" in sub_meta
        assert materialize(pipeline, instance, ["minilongbench_estimates"], SLUG).success
        meta = instance.get_latest_materialization_event(
            dg.AssetKey("minilongbench_estimates")).asset_materialization.metadata
        assert meta["scores_from"].value == "metric_scores (released)"
        assert meta["n_observed"].value == 136 and meta["n_subset"].value == 237 and not meta["in_training"].value
        assert meta["missing_tasks"].value == {"lsht": 8, "multifieldqa_zh": 15, "musique": 7, "narrativeqa": 6,
                                               "passage_retrieval_zh": 15, "qmsum": 6, "repobench-p": 23,
                                               "samsum": 15, "vcsum": 6}

    est = pl.read_parquet(partition_path(settings.lake_dir, "minilongbench_estimates", {MODEL_DIM: SLUG}))
    fitted = mlbm.MiniLongBench.load(settings.lake_dir / "_minilongbench")
    for mode in mlbm.MODES:
        overall = est.filter((pl.col("mode") == mode) & (pl.col("scope") == "overall"))["estimate"][0]
        assert overall == pytest.approx(fitted.estimate(observed, mode).overall, abs=1e-12)
    truth = mlbm.true_scores(mlbm.ScoreMatrix.from_frame(scores.filter(pl.col("model") == HELD_OUT)))[HELD_OUT]
    predict = est.filter((pl.col("mode") == "predict") & (pl.col("scope") == "overall"))["estimate"][0]
    assert abs(predict - truth.overall) < 0.03, (predict, truth.overall)  # measured +0.007 (unit test's fixture)
