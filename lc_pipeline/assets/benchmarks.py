"""The benchmarks group: ``benchmark_scores``, each benchmark's published table for one model (task, group
and overall rows per table and length, aggregated as the benchmark's task file declares; spec
released_benchmarks.md, helmet.md §6, lveval.md §9, loong.md §7). Wiring only: the table is
score/benchmark_scores.py."""

import dagster as dg
import polars as pl

from lc_pipeline.assets.common import FINGERPRINT_KEY, json_metadata, preview
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, ModelsResource
from lc_pipeline.score.benchmark_scores import benchmark_table
from lc_pipeline.tasks.catalog import catalog_for


def build(parts: Partitions) -> list:
    @dg.asset(
        partitions_def=parts.model,
        ins={
            "metric_scores": dg.AssetIn(
                partition_mapping=dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=MODEL_DIM)
            ),
            "instances": dg.AssetIn(partition_mapping=dg.AllPartitionMapping()),
        },
        group_name="benchmarks",
        kinds={"parquet"},
        description=(
            "Each benchmark's published table for one model: per length, a row per task (its first declared "
            "metric, x100), per group (aggregation.group, per aggregation.table: LongBench's en / zh) and an overall "
            "per table, as the task file's headline says (mean of groups, of tasks or of instances); plain instances "
            "only; judge-only tasks are counted in the metadata"
        ),
    )
    def benchmark_scores(
        context: dg.AssetExecutionContext,
        metric_scores: pl.DataFrame,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
    ):
        config = benchmark.load()
        slug = context.partition_key
        try:
            result = benchmark_table(metric_scores, instances, catalog_for(config), slug)
        except ValueError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        out = result.table
        overall = out.filter(pl.col("level") == "overall").select("benchmark", "table", "length", "metric", "score", "n")
        return dg.Output(
            out.drop("model"),  # the partition path carries the model
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("benchmark_scores", config, models.spec(slug).fingerprint()),
                "rows": out.height,
                **json_metadata({
                    "benchmarks": sorted(out["benchmark"].unique().to_list()),
                    "judge_only_tasks": result.judge_only,
                    "unscored_instances": result.unscored,
                }),
                "variant_rows_left_out": result.variant_rows,
                "overall": preview(overall, n=50),
            },
        )

    return [benchmark_scores]
