"""The reports group: the leaderboard over every model (LongScore and the old metric per metric, spec
100longbench.md; LLM-judge rubrics beside them as 'judge:<rubric>' rows, score/longscore.py); for a benchmark
run as released, each model's overall per published table (score/benchmark_scores.py)."""

import dagster as dg
import polars as pl

from lc_pipeline import plots, schemas, storage
from lc_pipeline.assets.common import FINGERPRINT_KEY, plot_metadata, preview
from lc_pipeline.resources.parquet_io import read_judge_scores, read_table
from lc_pipeline.score.benchmark_scores import benchmark_leaderboard
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import BenchmarkResource, LakeResource
from lc_pipeline.score.longscore import judge_leaderboard, leaderboard_frame


def build(parts: Partitions, released: bool = False) -> list:
    if released:
        return [released_leaderboard()]

    @dg.asset(
        ins={"long_scores": dg.AssetIn(metadata={"allow_missing_partitions": True})},
        # Judging is optional: its partitions are read from the lake when there are any.
        deps=["judge_scores"],
        group_name="reports",
        kinds={"parquet"},
        description="One row per model and metric: Base Ability, old metric, LongScore and their ranks; "
        "LLM-judge rubrics beside the metrics as 'judge:<rubric>' rows",
    )
    def leaderboard(context: dg.AssetExecutionContext, long_scores: pl.DataFrame, benchmark: BenchmarkResource,
                    lake: LakeResource):
        config = benchmark.load()
        judged = read_judge_scores(lake.base_dir)
        judge_board, judge_left_out = judge_leaderboard(judged, config.base_lengths, config.long_lengths)
        out = pl.concat([leaderboard_frame(long_scores), judge_board]).sort(
            ["metric", "rank_long_score", "model"], nulls_last=True)
        if judge_left_out:
            context.log.warning(f"judge rubrics left out of the leaderboard: {judge_left_out}")
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("leaderboard", config),
                "models": out["model"].n_unique(),
                "leaderboard": preview(out.sort("metric", "rank_long_score"), n=50),
                "judge_metrics": dg.MetadataValue.json(sorted(set(judge_board["metric"]))),
                "judge_left_out": dg.MetadataValue.json(judge_left_out),
                **plot_metadata(context, "score_vs_length",
                                lambda: plots.score_vs_length(plots.leaderboard_points(long_scores), out)),
            },
        )

    return [leaderboard]


def released_leaderboard() -> dg.AssetsDefinition:
    """The leaderboard of a benchmark run as released: each model's overall per published table (no LongScore)."""

    @dg.asset(
        name="leaderboard",
        deps=["benchmark_scores"],  # every model's partition, read from the lake
        group_name="reports",
        kinds={"parquet"},
        description="One row per model and published table (metric '<benchmark>/<table>', e.g. longbench/en): the "
        "table's overall score averaged over its length partitions, per partition in scores_by_length, ranked",
    )
    def leaderboard(benchmark: BenchmarkResource, lake: LakeResource):
        config = benchmark.load()
        tables = read_table(storage.lake_path(lake.base_dir) / "benchmark_scores")
        out = benchmark_leaderboard(tables) if tables is not None else schemas.empty("leaderboard")
        return dg.Output(out, metadata={
            FINGERPRINT_KEY: stage_fingerprint("leaderboard", config),
            "models": out["model"].n_unique(),
            "leaderboard": preview(out.select("metric", "model", "old_metric", "rank_old_metric", "scores_by_length",
                                              "n_instances"), n=50),
        })

    return leaderboard
