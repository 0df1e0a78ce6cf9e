"""The benchmarks group: ``benchmark_scores``, each benchmark's published table for one model (task, group
and overall rows per table and length, aggregated as the benchmark's task file declares; spec
released_benchmarks.md, helmet.md §6, lveval.md §9, loong.md §7). Wiring only: the table is
score/benchmark_scores.py.

Judging is optional (a judge server is needed only by benchmarks that report a judge): ``judge_scores`` is a
dependency the asset does not load through the IO manager (a missing upstream would fail the run); when a
task of the instances is judge-scored, the model's judge_scores partitions are read from the lake, as the
leaderboard reads them (spec dagster.md: ``deps`` order without loading). Instances of a judged task with no
verdict yet are counted in the metadata (``unjudged_instances``) and logged; rematerialize benchmark_scores
once ``judge_scores`` has run. The model's ``generations`` partitions (upstream of metric_scores) are read from
the lake too, for each row's skipped and truncated shares and status counts. Likewise ``citation_scores``
(ALCE's citation recall and precision, NLI-judged), read when a task declares those metrics: a Cite task's cell
needs all three of its numbers.
"""

import dagster as dg
import polars as pl

from lc_pipeline import storage
from lc_pipeline.assets.common import FINGERPRINT_KEY, json_metadata, preview
from lc_pipeline.lake_files import partition_path, read_partition
from lc_pipeline.resources.parquet_io import read_judge_scores, read_model_partitions
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import LENGTH_DIM, MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, LakeResource, ModelsResource
from lc_pipeline.score.benchmark_scores import (benchmark_table, judged_tasks, nli_tasks, selected_tasks,
                                                with_citation_scores)
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
        # Ordered after the model's verdicts, read from the lake only when a task is judge-scored.
        deps=[dg.AssetDep(table, partition_mapping=dg.MultiToSingleDimensionPartitionMapping(
            partition_dimension_name=MODEL_DIM)) for table in ("judge_scores", "citation_scores")],
        group_name="benchmarks",
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
            result, read = model_table(lake.base_dir, config, slug, metric_scores, instances, log=context.log.info)
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
        return dg.Output(
            out.drop("model"),  # the partition path carries the model
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("benchmark_scores", config, models.spec(slug).fingerprint()),
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


def model_table(lake_dir, config, slug: str, metric_scores: pl.DataFrame, instances: pl.DataFrame,
                only: set[str] | None = None, log=lambda message: None):
    """``slug``'s published tables (score/benchmark_scores.benchmark_table) from its metric_scores and the instances,
    with its judge verdicts, citation rows and generations read from the lake; ``only``: those instance ids alone
    (every frame restricted to them: the leaderboard's common instances). Returns (the BenchmarkTable, what was
    read: judged, cited, judgments, citations, generations)."""
    catalog = catalog_for(config)
    if only is not None:
        ids = sorted(only)
        instances = instances.filter(pl.col("instance_id").is_in(ids))
        metric_scores = metric_scores.filter(pl.col("instance_id").is_in(ids))
    lengths = instances["length"].unique().to_list()
    judgments = citations = None
    judged = judged_tasks(instances, catalog)
    if judged:
        judgments = read_judge_scores(lake_dir, slug).filter(pl.col(LENGTH_DIM).is_in(lengths))
        if only is not None:
            judgments = judgments.filter(pl.col("instance_id").is_in(ids))
        log(f"judge-scored tasks {judged}: {judgments.height} verdicts of {slug} in the lake")
    cited = nli_tasks(instances, catalog)
    if cited:  # ALCE's citation metrics: NLI-judged rows of citation_scores
        citations = read_model_partitions(lake_dir, "citation_scores", slug).filter(pl.col(LENGTH_DIM).is_in(lengths))
        if only is not None:
            citations = citations.filter(pl.col("instance_id").is_in(ids))
        log(f"tasks with NLI metrics {cited}: {citations.height} citation_scores rows of {slug}")
        metric_scores = with_citation_scores(metric_scores, citations)
    # The model's generations (status, truncated) for the shares and status_counts of every row.
    generations = read_model_partitions(lake_dir, "generations", slug).filter(pl.col(LENGTH_DIM).is_in(lengths))
    if only is not None:
        generations = generations.filter(pl.col("instance_id").is_in(ids))
    result = benchmark_table(metric_scores, instances, catalog, slug, judgments, generations,
                             selected=selected_tasks(config, catalog))
    return result, {"judged": judged, "cited": cited, "judgments": judgments, "citations": citations,
                    "generations": generations}


def current_instances(lake_dir, config) -> pl.DataFrame | None:
    """The config's instances in the lake (every length partition there, with ``length``), None when none is."""
    lake = storage.lake_path(lake_dir)
    frames = [read_partition(path, {LENGTH_DIM: lv}) for lv in config.lengths
              for path in [partition_path(lake, "instances", {LENGTH_DIM: lv})] if path.exists()]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def paired_tables(lake_dir, config, tables: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """Every model's benchmark_scores (``tables``, with ``model``) on the instances every one of them was run on
    (issue 31; the README's "rows on the common instances"): the config's current instances that each model has a
    generation of. When every model covers exactly those, the stored tables are used; otherwise each model's
    tables are computed again on the common instances (:func:`model_table` with ``only``). Returns (tables,
    {model: n_unpaired}): the instances of the model left out, those some other model lacks and those no longer
    among the current instances (records removed from the data since it ran)."""
    instances = current_instances(lake_dir, config)
    models = sorted(tables["model"].unique().to_list())
    if instances is None or not models:
        return tables, dict.fromkeys(models, 0)
    current = set(instances["instance_id"].to_list())
    covered = {m: set(read_model_partitions(lake_dir, "generations", m).filter(
        pl.col(LENGTH_DIM).is_in(list(config.lengths)))["instance_id"].to_list()) for m in models}
    common = set.intersection(current, *covered.values())
    unpaired = {m: len(covered[m] - common) for m in models}
    if all(covered[m] == common for m in models):
        return tables, unpaired
    frames = []
    for m in models:
        scores = read_model_partitions(lake_dir, "metric_scores", m).filter(
            pl.col(LENGTH_DIM).is_in(list(config.lengths)))
        result, _ = model_table(lake_dir, config, m, scores, instances, only=common)
        frames.append(result.table.with_columns(model=pl.lit(m)))
    return pl.concat(frames, how="diagonal_relaxed"), unpaired
