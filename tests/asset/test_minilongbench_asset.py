"""minilongbench_subset and minilongbench_estimates, materialized in process.

1. On the shared real data: train on 16 of the 20 LLMs (an imported score matrix named in the
   config's ``minilongbench:`` section, with the released PCA-10 representations), then estimate
   the 4 others, one model partition each, from their subset scores only.
2. On our own ``metric_scores`` tables (written straight into the lake for a few fake models),
   with representations embedded from the instances' text by the offline sentence-transformers
   model.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest
import yaml
from conftest import TINY_CONFIG, settings_for

from lc_pipeline.benchmarks import minilongbench as mlbm
from lc_pipeline.config import ConfigError
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.lake import query
from lc_pipeline.partitions import MODEL_DIM
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic
from lc_pipeline.settings import Settings

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "minilongbench"
HELD_OUT = ["qwen2.5-1.5b-base", "GOAT-7B-Community", "OLMo-1B", "Mistral-7B-Instruct-v0.2-sparsity-20"]


def minilongbench_settings(root: Path, minilongbench: dict) -> Settings:
    cfg = root / "mlb.yaml"
    cfg.write_text(yaml.safe_dump({**TINY_CONFIG, "name": "mlb", "minilongbench": minilongbench}))
    return settings_for(root, cfg, lake="data_lake")


def materialize(pipeline, instance, asset: str, partition: str | None = None):
    return dg.materialize(pipeline.assets, selection=[asset], partition_key=partition, resources=pipeline.resources,
                          instance=instance)


@pytest.mark.skipif(not (DATA / "scores_train_models.parquet").exists(), reason="shared MiniLongBench data absent")
def test_imported_matrix_subset_and_held_out_estimates(tmp_path):
    scores = pl.read_parquet(DATA / "scores_train_models.parquet")
    scores.filter(~pl.col("model").is_in(HELD_OUT)).write_parquet(tmp_path / "train.parquet")
    scores.filter(pl.col("model").is_in(HELD_OUT)).select("model", "global_sample", "score").write_parquet(
        tmp_path / "new.parquet")
    settings = minilongbench_settings(tmp_path, {
        "scores": "train.parquet",  # relative to the config file
        "embeddings": str(DATA / "sample_pca10.parquet"),
        "estimate_scores": "new.parquet",
        "epochs": 300,
        "baseline_draws": 5,
        "validation_splits": 0,  # two more IRT fits; the validation's metadata is tested on our own tables below
        "mode": "predict",
    })
    pipeline = build_pipeline(settings)
    slugs = [m.lower() for m in HELD_OUT]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODEL_DIM, slugs)
        result = materialize(pipeline, instance, "minilongbench_subset")
        assert result.success
        subset = pl.read_parquet(partition_path(settings.lake_dir, "minilongbench_subset", {}))
        assert subset.height == 237 and subset["sample_id"].n_unique() == 237
        assert subset.group_by("category").len().sort("category")["len"].to_list() == [49, 39, 39, 37, 39, 34]
        assert subset["alpha"].list.len().unique().to_list() == [10]
        meta = instance.get_latest_materialization_event(dg.AssetKey("minilongbench_subset")).asset_materialization.metadata
        assert meta["train_models"].value == 16 and meta["threshold"].value == pytest.approx(0.3664, abs=0.011)
        assert meta["train_spearman_predict"].value > 0.8
        assert "random_median_spearman_predict" in meta and "random_median_spearman_blend" in meta
        assert meta["validation"].value == "not run (minilongbench.validation_splits: 0)"
        model_dir = settings.lake_dir / "_minilongbench"
        assert (model_dir / "meta.json").exists() and mlbm.MiniLongBench.load(model_dir).train_models[0]

        for slug in slugs:
            assert materialize(pipeline, instance, "minilongbench_estimates", slug).success
        est = pl.read_parquet(partition_path(settings.lake_dir, "minilongbench_estimates", {MODEL_DIM: slugs[0]}))
        assert set(est["mode"]) == {"predict", "direct", "weighted", "blend"}
        assert est.filter(pl.col("scope") == "category").height == 24 and est.filter(pl.col("scope") == "task").height >= 40
        assert set(est["n_observed"]) == {237} and not est["in_training"].any()
        est_meta = instance.get_latest_materialization_event(
            dg.AssetKey("minilongbench_estimates")).asset_materialization.metadata
        assert est_meta["mode"].value == "predict"  # minilongbench.mode: the estimate reported first
        assert est_meta["estimate"].value == est_meta["overall_predict"].value

    _cols, rows = query(settings.lake_dir, "select model, estimate from minilongbench_estimates "
                                          "where scope = 'overall' and mode = 'blend' order by model")
    predicted = dict(rows)
    truth = mlbm.true_scores(mlbm.ScoreMatrix.from_frame(scores.filter(pl.col("model").is_in(HELD_OUT))))
    rho = mlbm.spearman([predicted[m.lower()] for m in HELD_OUT], [truth[m].overall for m in HELD_OUT])
    assert rho >= 0.8, (predicted, {m: truth[m].overall for m in HELD_OUT})


def fake_lake(lake: Path, n_models: int = 6) -> None:
    """metric_scores for fake models (hive layout, as the pipeline writes them) and the instances."""
    rng = np.random.default_rng(0)
    tasks = {"single_hop_qa": "single-doc QA", "multi_hop_qa": "multi-doc QA", "counting": "synthetic"}
    inst = []
    for t, category in tasks.items():
        for i in range(14):
            inst.append((f"{t}-{i}", t, category, f"Question {i} about {t.replace('_', ' ')}?",
                         f"Some context on topic {i % 5} for {t}. " * 20))
    ability = np.linspace(0.2, 0.8, n_models)
    for length in ("1k", "2k"):
        df = pl.DataFrame(inst, schema=["instance_id", "task", "category", "question", "context"], orient="row")
        write_parquet_atomic(df.with_columns(pl.col("instance_id") + f"@{length}"),
                             partition_path(lake, "instances", {"length": length}))
        for m in range(n_models):
            rows = []
            for iid, t, c, *_ in inst:
                p = ability[m] * (0.6 if t == "counting" else 1.0)
                for metric in ("subem", "f1"):
                    rows.append((f"{iid}@{length}", t, c, metric, float(np.clip(p + rng.normal(scale=0.2), 0, 1))))
            write_parquet_atomic(
                pl.DataFrame(rows, schema=["instance_id", "task", "category", "metric", "score"], orient="row"),
                partition_path(lake, "metric_scores", {"length": length, MODEL_DIM: f"fake-{m}"}),
            )


def test_own_metric_scores_with_text_representations(tmp_path):
    settings = minilongbench_settings(tmp_path, {"ratio": 0.75, "dims": 3, "epochs": 60, "baseline_draws": 3})
    fake_lake(settings.lake_dir)
    pipeline = build_pipeline(settings)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODEL_DIM, ["fake-5"])
        assert materialize(pipeline, instance, "minilongbench_subset").success
        subset = pl.read_parquet(partition_path(settings.lake_dir, "minilongbench_subset", {}))
        assert subset.height == int(0.25 * 84) == 21
        assert set(subset["category"]) == {"single-doc QA", "multi-doc QA", "synthetic"}
        assert subset["sample_id"].str.contains("@").all()  # instance ids
        meta = instance.get_latest_materialization_event(dg.AssetKey("minilongbench_subset")).asset_materialization.metadata
        assert meta["source"].value == "metric_scores" and meta["train_models"].value == 6
        assert "PCA-3" in meta["representation"].value
        # Leave-models-out on the 6 training models (the default: 2 splits x 2 folds x 2 K-Means seeds):
        # every mode's held-out figures beside the median of random subsets scored in the same mode.
        for mode in mlbm.MODES:
            for figure in ("spearman", "mae"):
                ours, luck = meta[f"validation_{figure}_{mode}"].value, meta[f"validation_random_median_{figure}_{mode}"].value
                assert (-1 <= ours <= 1 and -1 <= luck <= 1) if figure == "spearman" else (0 < ours < 0.5 and 0 < luck < 0.5)
        assert meta["validated_mode_ranking"].value in (*mlbm.MODES, "random")
        assert meta["validated_mode_error"].value in (*mlbm.MODES, "random")
        assert "2-fold leave-models-out x 2 split(s) x 2 K-Means seed(s), 20 random draws" in meta["validation"].value
        assert "| blend |" in meta["validation_table"].value
        assert materialize(pipeline, instance, "minilongbench_estimates", "fake-5").success
        est = pl.read_parquet(partition_path(settings.lake_dir, "minilongbench_estimates", {MODEL_DIM: "fake-5"}))
        assert est["in_training"].all() and set(est["n_observed"]) == {21}
        direct = est.filter((pl.col("mode") == "direct") & (pl.col("scope") == "overall"))["estimate"][0]
        assert 0.4 < direct < 1.0  # fake-5 is the strongest fake model (about 0.8 on QA, 0.5 on counting)


def test_subset_without_any_scores_fails_clearly(tmp_path):
    settings = minilongbench_settings(tmp_path, {})
    pipeline = build_pipeline(settings)
    with dg.instance_for_test() as instance, pytest.raises(dg.Failure, match="no metric_scores"):
        materialize(pipeline, instance, "minilongbench_subset")


def test_an_unknown_option_fails_naming_the_config_file_and_the_key(tmp_path):
    settings = minilongbench_settings(tmp_path, {"ratios": 0.9})
    # The config is typed (config.py): the definitions do not load, long before a run.
    with pytest.raises(ConfigError, match=r"mlb\.yaml: minilongbench: unknown keys \['ratios'\]; known keys"):
        build_pipeline(settings)
