"""The scoring group: metric_scores per generation, 100-LongBench's prior_knowledge filter, and
long_scores (LongScore and the old metric) per model. The metrics are the tasks' (score/metric_scores.py,
score/task_metrics.py); LongScore is score/longscore.py (spec 100longbench.md)."""

import dagster as dg
import polars as pl

from lc_pipeline import plots, schemas
from lc_pipeline.assets.common import FINGERPRINT_KEY, plot_metadata, preview
from lc_pipeline.assets.generation import GPU_POOL, GPU_STEP_TAGS
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, ModelsResource
from lc_pipeline.score.longbench100 import prior_knowledge_frame
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.score.per_model import (
    missing_lengths,
    model_long_scores,
    no_context_questions,
    no_context_requests,
    overall_scores,
)
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
        items = no_context_questions(instances, pk)
        results = []
        if items.height:
            requests = no_context_requests(items, pk.max_new_tokens)
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
        missing = missing_lengths(metric_scores, config.base_lengths, config.long_lengths)
        if missing:
            raise dg.Failure(f"long_scores {slug}: metric_scores missing for lengths {missing}", allow_retries=False)
        out, kept, dropped = model_long_scores(metric_scores, prior_knowledge, config.base_lengths, config.long_lengths)
        overall = overall_scores(out)
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

    return [metric_scores, prior_knowledge, long_scores]
