"""metric_scores, long_scores, leaderboard."""


import dagster as dg
import polars as pl

from lc_pipeline import plots, schemas
from lc_pipeline.assets.common import FINGERPRINT_KEY, plot_metadata, preview
from lc_pipeline.assets.generation import GPU_POOL, GPU_STEP_TAGS
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, LakeResource, ModelsResource
from lc_pipeline.construct.longbench100 import NO_CONTEXT_PROMPT
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.score.longbench100 import prior_knowledge_frame
from lc_pipeline.score.longscore import judge_leaderboard, leaderboard_frame, long_scores_frame
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.tasks.catalog import catalog_for



def _number(v: float | None) -> dg.MetadataValue:
    # An undefined LongScore (zero Base Ability) is shown as such, not as 0.
    return dg.MetadataValue.text("undefined (Base Ability is 0)") if v is None else dg.MetadataValue.float(float(v))


def build(parts: Partitions) -> list:
    @dg.asset(
        partitions_def=parts.length_x_model,
        group_name="scoring",
        kinds={"parquet"},
        description="Per generation: the metrics its task declares (task files; `lcp tasks list`): SubEM, EM and "
        "token F1 for the QA suite, LongBench's per-task metric ('longbench'), 100-LongBench's ('lb100'), HELMET's "
        "('helmet'), LV-Eval keyword recall ('lveval', also on every item with CFI/KPR variants)",
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
            generations.select(schemas.GENERATIONS.names()), instances.select(schemas.INSTANCES.names()),
            catalog_for(config), lveval_variant=config.lveval.metric_variant,
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
        ins={"instances": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())},
        group_name="scoring",
        kinds={"parquet"},
        pool=GPU_POOL,  # it loads the model and generates (questions without context): a GPU step
        op_tags=GPU_STEP_TAGS,
        description=(
            "100-LongBench's QA prior-knowledge filter: each QA item asked WITHOUT context; items the model answers "
            "with score >= threshold (and not 'unanswerable') are left out of its scores at every length"
        ),
    )
    def prior_knowledge(
        context: dg.AssetExecutionContext,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
    ):
        config = benchmark.load()
        pk = config.prior_knowledge
        slug = context.partition_key
        spec = models.spec(slug)
        items = (
            instances.filter(pl.col("task").is_in(list(pk.tasks)) if pk.enabled else pl.lit(False))
            .select("item_id", "task", "question", "answers")
            .unique("item_id", keep="first")
            .sort("item_id")
            .with_columns(prompt=pl.col("question").map_elements(
                lambda q: NO_CONTEXT_PROMPT.format(input=q), return_dtype=pl.String))
        )
        results = []
        if items.height:
            requests = [GenerationRequest(key=i, prompt=p, max_new_tokens=pk.max_new_tokens)
                        for i, p in items.select("item_id", "prompt").iter_rows()]
            results = [vars(r) for r in models.generator(slug).generate(requests)]
        out = prior_knowledge_frame(items, results, metric=pk.metric, threshold=pk.threshold)
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("prior_knowledge", config, spec.fingerprint()),
                "enabled": pk.enabled,
                "qa_items": out.height,
                "dropped": int(out["dropped"].sum()),
                "said_unanswerable": int(out["said_unanswerable"].sum()),
                "threshold": pk.threshold,
                "metric": pk.metric,
                "preview": preview(out.select("item_id", "task", "output", "score", "dropped")),
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
            "first) with the old metric (mean raw score over the long lengths) beside it; items the model answered "
            "without context (prior_knowledge) are left out"
        ),
    )
    def long_scores(
        context: dg.AssetExecutionContext,
        metric_scores: pl.DataFrame,
        prior_knowledge: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
    ):
        config = benchmark.load()
        slug = context.partition_key
        present = set(metric_scores["length"].unique())
        missing = [lv for lv in (*config.base_lengths, *config.long_lengths) if lv not in present]
        if missing:
            raise dg.Failure(f"long_scores {slug}: metric_scores missing for lengths {missing}", allow_retries=False)
        dropped = prior_knowledge.filter(pl.col("dropped"))["item_id"]
        kept = metric_scores.filter(~pl.col("item_id").is_in(dropped.implode()))
        frames = [
            long_scores_frame(
                kept.filter(pl.col("metric") == m).select("task", "length", "score"),
                list(config.base_lengths),
                list(config.long_lengths),
                metric=m,
                # A model scoring 0 at the base lengths has no defined LongScore (the paper needs a
                # non-trivial base ability): record null rather than fail the whole model.
                on_zero_base="null",
            )
            for m in sorted(kept["metric"].unique())
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
                "items_left_out_by_prior_knowledge": dropped.len(),
                "preview": preview(out.filter(pl.col("task") == "overall"), n=20),
                **plot_metadata(context, "score_vs_length", lambda: plots.score_vs_length(
                    plots.mean_scores(kept), overall.with_columns(model=pl.lit(slug)), title=slug)),
                **plot_metadata(context, "depth_x_length", lambda: plots.depth_length_heatmap(kept)),
            },
        )

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
        from lc_pipeline.assets.judge import read_judge_scores

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

    return [metric_scores, prior_knowledge, long_scores, leaderboard]
