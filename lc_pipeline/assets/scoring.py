"""metric_scores, long_scores, leaderboard."""


import dagster as dg
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.assets.common import FINGERPRINT_KEY, preview
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, ModelsResource
from lc_pipeline.score.longscore import leaderboard_frame, long_scores_frame
from lc_pipeline.score.metrics import score_frame

METRICS = ("subem", "em", "f1")


def _number(v: float | None) -> dg.MetadataValue:
    # An undefined LongScore (zero Base Ability) is shown as such, not as 0.
    return dg.MetadataValue.text("undefined (Base Ability is 0)") if v is None else dg.MetadataValue.float(float(v))


def build(parts: Partitions) -> list:
    @dg.asset(
        partitions_def=parts.length_x_model,
        group_name="scoring",
        kinds={"parquet"},
        description="SubEM, EM and token F1 (LongBench normalization; max of raw and parsed output) per generation",
    )
    def metric_scores(
        context: dg.AssetExecutionContext,
        generations: pl.DataFrame,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
    ):
        config = benchmark.load()
        slug = context.partition_key.keys_by_dimension[MODEL_DIM]
        out = score_frame(
            generations.select(schemas.GENERATIONS.names()), instances.select(schemas.INSTANCES.names()), METRICS
        )
        means = dict(out.group_by("metric").agg(pl.col("score").mean()).sort("metric").iter_rows())
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("metric_scores", config, models.spec(slug).fingerprint()),
                **{f"mean_{m}": float(v) for m, v in means.items()},
                "rows": out.height,
            },
        )

    @dg.asset(
        partitions_def=parts.model,
        ins={
            "metric_scores": dg.AssetIn(
                partition_mapping=dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=MODEL_DIM)
            )
        },
        group_name="scoring",
        kinds={"parquet"},
        description=(
            "100-LongBench LongScore per task and overall (100*(S_l - Base)/Base, scores averaged across tasks "
            "first) with the old metric (mean raw score over the long lengths) beside it"
        ),
    )
    def long_scores(
        context: dg.AssetExecutionContext,
        metric_scores: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
    ):
        config = benchmark.load()
        slug = context.partition_key
        present = set(metric_scores["length"].unique())
        missing = [lv for lv in (*config.base_lengths, *config.long_lengths) if lv not in present]
        if missing:
            raise dg.Failure(f"long_scores {slug}: metric_scores missing for lengths {missing}", allow_retries=False)
        frames = [
            long_scores_frame(
                metric_scores.filter(pl.col("metric") == m).select("task", "length", "score"),
                list(config.base_lengths),
                list(config.long_lengths),
                metric=m,
                # A model scoring 0 at the base lengths has no defined LongScore (the paper needs a
                # non-trivial base ability): record null rather than fail the whole model.
                on_zero_base="null",
            )
            for m in METRICS
        ]
        out = pl.concat(frames)
        overall = out.filter((pl.col("task") == "overall") & (pl.col("length_level") == "avg"))
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("long_scores", config, models.spec(slug).fingerprint()),
                **{f"long_score_{m}": _number(v) for m, v in overall.select("metric", "long_score").iter_rows()},
                **{f"old_metric_{m}": _number(v) for m, v in overall.select("metric", "score").iter_rows()},
                "undefined_long_scores": int(out["long_score"].null_count()),
                "preview": preview(out.filter(pl.col("task") == "overall"), n=20),
            },
        )

    @dg.asset(
        ins={"long_scores": dg.AssetIn(metadata={"allow_missing_partitions": True})},
        group_name="reports",
        kinds={"parquet"},
        description="One row per model and metric: Base Ability, old metric, LongScore and their ranks",
    )
    def leaderboard(long_scores: pl.DataFrame, benchmark: BenchmarkResource):
        config = benchmark.load()
        out = leaderboard_frame(long_scores)
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("leaderboard", config),
                "models": out["model"].n_unique(),
                "leaderboard": preview(out.filter(pl.col("metric") == "subem"), n=50),
            },
        )

    return [metric_scores, long_scores, leaderboard]
