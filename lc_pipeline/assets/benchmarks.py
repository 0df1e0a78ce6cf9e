"""The benchmarks group: ``benchmark_scores``, each benchmark's published table for one model (task, group
and overall rows per table and length, aggregated as the benchmark's task file declares; spec
released_benchmarks.md, helmet.md §6, lveval.md §9, loong.md §7). Wiring only: the table is
score/benchmark_scores.py (from the lake's rows: score/lake_tables.py).

Side inputs (side_inputs.py: read from the lake, each for its reason, declared as ``deps``): judging is optional
(a judge server is needed only by benchmarks that report a judge), so ``judge_scores`` is not loaded through the IO
manager (a missing upstream would fail the run); when a task of the instances is judge-scored, the model's
judge_scores partitions are read from the lake, as the leaderboard reads them (spec dagster.md: ``deps`` order
without loading). Instances of a judged task with no verdict yet are counted in the metadata
(``unjudged_instances``) and logged; rematerialize benchmark_scores once ``judge_scores`` has run. Likewise
``citation_scores`` (ALCE's citation recall and precision, NLI-judged), read when a task declares those metrics: a
Cite task's cell needs all three of its numbers. The model's ``generations`` partitions give each row's skipped and
truncated shares and status counts.
"""

import dagster as dg
import polars as pl

from lc_pipeline.assets import side_inputs
from lc_pipeline.assets.common import json_metadata, preview
from lc_pipeline.assets.side_inputs import side_input_reader
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.fingerprints import INSTANCE_FIELDS
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, LakeResource, ModelsResource
from lc_pipeline.score.lake_tables import model_table


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
        **declared("3", INSTANCE_FIELDS, adds=("model",), side_inputs=side_inputs.BENCHMARK_SCORES),
        kinds={"parquet"},
        description=(
            "Each benchmark's published table for one model: per length, a row per task (its first declared "
            "metric, x100, or its judge rubric: judge:<rubric> with scoring_success and perfect_rate rows), per "
            "group (aggregation.group, per aggregation.table: LongBench's en / zh) and an overall per table, as the "
            "task file's headline says (mean of groups, of tasks or of instances), and the overall per value of the "
            "headline's breakdown fields (LongBench v2: difficulty, length); plain instances only; judged tasks "
            "without verdicts are counted in the metadata; every score row with its seeded bootstrap 95% interval "
            "(instances resampled within task cells) and the shares of its instances skipped / truncated"
        ),
    )
    def benchmark_scores(
        context: dg.AssetExecutionContext,
        metric_scores: pl.DataFrame,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
        lake: LakeResource,
    ):
        config = benchmark.load()
        slug = context.partition_key
        try:
            result, read = model_table(side_input_reader(context, lake), config, slug, metric_scores, instances, log=context.log.info)
        except ValueError as exc:
            raise dg.Failure(f"benchmark_scores {slug}: {exc}", allow_retries=False) from exc
        judged, cited, judgments, citations, generations = (read[k] for k in ("judged", "cited", "judgments",
                                                                              "citations", "generations"))
        if result.unjudged:
            context.log.warning(f"judge-scored tasks without verdicts (materialize judge_scores, then this asset "
                                f"again): {result.unjudged}")
        out = result.table
        overall = out.filter(pl.col("level") == "overall").select(
            "benchmark", "table", "length", "metric", "score", "ci_low", "ci_high", "n", "skipped_share",
            "truncated_share")
        return versioned(
            out.drop("model"),  # the partition path carries the model
            own_fingerprint(context, config, models.spec(slug).fingerprint()),
            metadata={
                "rows": out.height,
                "judge_verdicts": 0 if judgments is None else judgments.height,
                "citation_rows": 0 if not cited else citations.height,
                "generation_rows": generations.height,
                **json_metadata({
                    "benchmarks": sorted(out["benchmark"].unique().to_list()),
                    "judged_tasks": judged,
                    "nli_tasks": cited,
                    "unjudged_instances": result.unjudged,
                    "unscored_instances": result.unscored,
                    "breakdown_missing": result.breakdown_missing,
                }),
                "variant_rows_left_out": result.variant_rows,
                "overall": preview(overall, n=50),
            },
        )

    return [benchmark_scores]
