"""The reports group: the leaderboard over every model (LongScore and the old metric per metric, spec
100longbench.md; the headline and LLM-judge rubrics beside them as 'judge:<rubric>' rows, score/longscore.py),
each metric on the instances every model of it answered, with bootstrap intervals and the skipped / truncated /
invalid shares (score/board.py); for a benchmark run as released, each model's overall per published table
(score/benchmark_scores.py)."""

import dagster as dg
import polars as pl

from lc_pipeline import plots, schemas
from lc_pipeline.assets import side_inputs
from lc_pipeline.assets.common import plot_metadata, preview
from lc_pipeline.assets.side_inputs import side_input_reader
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.fingerprints import LONG_FIELDS
from lc_pipeline.lake_files import SideInputReader
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, LakeResource
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.score.benchmark_scores import benchmark_leaderboard
from lc_pipeline.score.board import ROW_COLUMNS, not_scored_cells, paired_board
from lc_pipeline.score.lake_tables import current_instances, paired_tables
from lc_pipeline.score.longscore import (
    HEADLINE,
    JUDGE_METRIC_PREFIX,
    HeadlineUnavailable,
    headline_rows,
)
from lc_pipeline.score.per_model import config_headline_sources


def board_rows(reads: SideInputReader, config, long_scores: pl.DataFrame, rubric_overrides: dict) -> tuple[pl.DataFrame, str]:
    """The per-instance rows the board pairs (score/board.py ROW_COLUMNS), before drops: every metric of the
    models with long_scores (their metric_scores), the headline of those whose long_scores has it (each task
    from its source), and every judged model's parsed verdicts as 'judge:<rubric>'; and a note on the headline."""
    on_board = sorted(long_scores["model"].unique())
    metric_rows = reads.model_partitions("metric_scores").filter(pl.col(MODEL_DIM).is_in(on_board))
    judged = reads.judge_scores(respect_drops=False)  # the board drops each model's items itself
    frames = [metric_rows.select(ROW_COLUMNS)]
    note = "no model has headline rows"
    with_headline = sorted(long_scores.filter(pl.col("metric") == HEADLINE)[MODEL_DIM].unique())
    if with_headline:
        try:
            sources = config_headline_sources(config, metric_rows["task"].unique(), rubric_overrides)
        except HeadlineUnavailable as exc:
            note = str(exc)
        else:
            note = "; ".join(f"{t}: {s}" for t, s in sorted(sources.items()))
            for slug in with_headline:
                rows = headline_rows(metric_rows.filter(pl.col(MODEL_DIM) == slug),
                                     judged.filter(pl.col(MODEL_DIM) == slug), sources)
                frames.append(rows.with_columns(model=pl.lit(slug), metric=pl.lit(HEADLINE)).select(ROW_COLUMNS))
    ok = judged.filter(pl.col("score").is_not_null())  # unread verdicts: null, or 0 where the protocol says
    frames.append(ok.with_columns(metric=pl.lit(JUDGE_METRIC_PREFIX) + pl.col("rubric")).select(ROW_COLUMNS))
    return pl.concat([f.with_columns(pl.col("score").cast(pl.Float64)) for f in frames]), note


def build(parts: Partitions) -> list:
    """The leaderboard of constructed configs (LongScore) and the one of a benchmark run as released."""
    @dg.asset(
        ins={"long_scores": dg.AssetIn(metadata={"allow_missing_partitions": True})},
        group_name="reports",
        **declared("2", LONG_FIELDS, serves="constructed", runs="every_time", side_inputs=side_inputs.LEADERBOARD),
        kinds={"parquet"},
        description="One row per model and metric: Base Ability, old metric, LongScore and their ranks, on the "
        "instances every model of the metric answered (n_unpaired: the model's others), with a 95% bootstrap "
        "interval (items resampled, seeded) and the skipped / truncated / invalid shares; the headline and "
        "LLM-judge rubrics beside the metrics ('judge:<rubric>' rows)",
    )
    def leaderboard(context: dg.AssetExecutionContext, long_scores: pl.DataFrame, benchmark: BenchmarkResource,
                    lake: LakeResource, judge: JudgeResource):
        config = benchmark.load()
        reads = side_input_reader(context, lake)
        rows, headline_note = board_rows(reads, config, long_scores, judge.rubric_overrides)
        statuses = reads.generation_statuses()
        instances = current_instances(reads, config)  # rows of removed records are left out (issue 31)
        out, not_scored, left_out = paired_board(
            rows, config.base_lengths, config.long_lengths, dropped=reads.dropped_items(rows["model"].unique()),
            not_scored=not_scored_cells(statuses), statuses=statuses,
            current=None if instances is None else instances["instance_id"].to_list())
        judge_left_out = [r for r in left_out if f"/{JUDGE_METRIC_PREFIX}" in r]
        if left_out:
            context.log.warning(f"left out of the leaderboard: {left_out}")
        if not_scored:
            context.log.warning(f"not scored on the leaderboard: {not_scored}")
        paired = out.group_by("metric").agg(pl.len().alias("models"), pl.col("n_instances").max().alias("common"))
        return versioned(
            out, own_fingerprint(context, config),
            metadata={
                "models": out["model"].n_unique(),
                "leaderboard": preview(out.sort("metric", "rank_long_score"), n=50),
                "paired_on": dg.MetadataValue.json({m: f"{c} common instances ({n} models)" for m, n, c
                                                    in paired.sort("metric").iter_rows()}),
                "not_scored": dg.MetadataValue.json(not_scored),
                "left_out": dg.MetadataValue.json(left_out),
                "headline_sources": headline_note,
                "judge_metrics": dg.MetadataValue.json(sorted(m for m in out["metric"].unique()
                                                              if m.startswith(JUDGE_METRIC_PREFIX))),
                "judge_left_out": dg.MetadataValue.json(judge_left_out),
                **plot_metadata(context, "score_vs_length",
                                lambda: plots.score_vs_length(plots.leaderboard_points(long_scores), out)),
            },
        )

    return [leaderboard, released_leaderboard()]


def released_leaderboard() -> dg.AssetsDefinition:
    """The leaderboard of a benchmark run as released: each model's overall per published table (no LongScore)."""

    @dg.asset(
        name="leaderboard",
        group_name="reports",
        **declared("2", LONG_FIELDS, serves="released", runs="every_time",
                   side_inputs=side_inputs.RELEASED_LEADERBOARD),
        kinds={"parquet"},
        description="One row per model and published table (metric '<benchmark>/<table>', e.g. longbench/en): the "
        "table's overall score averaged over its length partitions, per partition in scores_by_length, ranked",
    )
    def leaderboard(context: dg.AssetExecutionContext, benchmark: BenchmarkResource, lake: LakeResource):
        config = benchmark.load()
        reads = side_input_reader(context, lake)
        tables = reads.table("benchmark_scores")
        unpaired: dict[str, int] = {}
        if tables is not None:
            try:  # every model on the instances each of them was run on (n_unpaired: the model's others)
                tables, unpaired = paired_tables(reads, config, tables)
            except ValueError as exc:
                raise dg.Failure(f"leaderboard: {exc}", allow_retries=False) from exc
            if any(unpaired.values()):
                context.log.warning(f"models paired on their common instances; left out per model: {unpaired}")
        out = benchmark_leaderboard(tables, unpaired) if tables is not None else schemas.empty("leaderboard")
        return versioned(out, own_fingerprint(context, config), metadata={
            "models": out["model"].n_unique(),
            "n_unpaired": dg.MetadataValue.json(unpaired),
            "leaderboard": preview(out.select("metric", "model", "old_metric", "rank_old_metric", "scores_by_length",
                                              "n_instances"), n=50),
        })

    return leaderboard
