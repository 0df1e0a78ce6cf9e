"""The scoring group: metric_scores per generation, 100-LongBench's prior_knowledge filter (no-context answers
scored by a metric or the judge), and long_scores per model (LongScore, the old metric, the headline with judged
tasks from judge_scores). Metrics: score/metric_scores.py, task_metrics.py; LongScore: score/longscore.py."""

import dagster as dg
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.assets import side_inputs
from lc_pipeline.assets.common import long_scores_metadata, preview
from lc_pipeline.assets.generation import GPU_POOL, GPU_STEP_TAGS
from lc_pipeline.assets.side_inputs import side_input_reader
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.fingerprints import INSTANCE_FIELDS, LONG_FIELDS, PRIOR_FIELDS
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, LakeResource, ModelsResource
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.score.fallbacks import FallbackZeros
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.score.per_model import (
    MissingLengths,
    judge_no_context,
    long_scores_of,
    no_context_probe,
    no_context_questions,
)
from lc_pipeline.score.prior_knowledge import prior_knowledge_frame
from lc_pipeline.tasks.catalog import catalog_for


def build(parts: Partitions) -> list:
    @dg.asset(
        partitions_def=parts.length_x_model,
        group_name="scoring", **declared("2", INSTANCE_FIELDS, adds=("model",)),
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
        fallbacks = FallbackZeros()  # official zeros that are not the answer's (ROUGE failed, NFD vs NFC)
        out = score_frame(
            generations.select(schemas.GENERATIONS.names()), instances.select(schemas.INSTANCES.names()),
            catalog_for(config), metric_variant=config.lveval.metric_variant, fallbacks=fallbacks,
        )
        for line in fallbacks.lines("instance ids"):
            context.log.warning(f"metric_scores {context.partition_key}: {line}")
        means = dict(out.group_by("metric").agg(pl.col("score").mean()).sort("metric").iter_rows())
        return versioned(
            out, own_fingerprint(context, config, models.spec(slug).fingerprint()),
            metadata={
                **{f"mean_{m}": float(v) for m, v in means.items()},
                "rows": out.height,
                # Generations left unscored (skipped, invalid) and rows whose answer did not parse (scored 0).
                "not_scored": int(generations["status"].is_in(list(schemas.NOT_SCORED)).sum()),
                "unparsable": int((out["status"] == "unparsable").sum()),
                **fallbacks.metadata(),  # official zeros counted: fallback_zeros, fallback_examples
            },
        )

    @dg.asset(
        partitions_def=parts.model,
        ins={"instances": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())},
        group_name="scoring", **declared("1", PRIOR_FIELDS, adds=("model",), serves="constructed"),
        kinds={"parquet"},
        pool=GPU_POOL,  # it loads the model and generates (questions without context): a GPU step
        op_tags=GPU_STEP_TAGS,
        description=(
            "100-LongBench's QA prior-knowledge filter: each QA item asked WITHOUT context; items the model answers "
            "with score >= threshold (and not 'unanswerable') are left out of its scores (metric and judge rows) at "
            "every length. The score: prior_knowledge.metric, or with scorer 'judge' the judge with the task's rubric"
        ),
    )
    def prior_knowledge(
        context: dg.AssetExecutionContext,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
        judge: JudgeResource,
    ):
        config = benchmark.load()
        pk = config.prior_knowledge
        slug = context.partition_key
        spec = models.spec(slug)
        items = no_context_questions(instances, pk)
        results, judged, judge_meta = [], None, {}
        requests, probe_key = no_context_probe(instances, items, pk.max_new_tokens, catalog_for(config))
        if items.height:
            results = [vars(r) for r in models.generator(slug).generate(requests)]
        if pk.scorer == "judge":
            try:
                judged, judge_meta = judge_no_context(items, results, instances.select(schemas.INSTANCES.names()),
                                                      judge.client(), judge.rubric_overrides, catalog_for(config))
            except ValueError as exc:
                raise dg.Failure(f"prior_knowledge {slug}: {exc}", allow_retries=False) from exc
        out = prior_knowledge_frame(items, results, metric=pk.metric, threshold=pk.threshold, judged=judged)
        return versioned(
            out, own_fingerprint(context, config, spec.fingerprint() + probe_key),  # probe: tasks probed raw
            metadata={
                "enabled": pk.enabled, "qa_items": out.height, "dropped": int(out["dropped"].sum()),
                "said_unanswerable": int(out["said_unanswerable"].sum()), "threshold": pk.threshold, "scorer": pk.scorer,
                "metric": pk.metric if pk.scorer == "metric" else "judge (each task's rubric)",
                **judge_meta,
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
        **declared("1", LONG_FIELDS, adds=("model",), serves="constructed", side_inputs=side_inputs.LONG_SCORES),
        kinds={"parquet"},
        description=(
            "100-LongBench LongScore per task and overall (100*(S_l - Base)/Base, scores averaged across tasks "
            "first) with the old metric (mean raw score over the long lengths) beside it, per metric; and the "
            "headline (metric 'headline'): each task scored by its task file's source, its judge rubric "
            "(judge_scores) when it declares one, else its first metric, once the judge has scored every length; "
            "items the model answered without context (prior_knowledge) are left out"
        ),
    )
    def long_scores(
        context: dg.AssetExecutionContext,
        metric_scores: pl.DataFrame,
        prior_knowledge: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
        lake: LakeResource,
        judge: JudgeResource,
    ):
        config = benchmark.load()
        slug = context.partition_key
        reads = side_input_reader(context, lake)
        try:
            scored = long_scores_of(config, slug, metric_scores, prior_knowledge,
                                    reads.judge_scores(slug, respect_drops=False),  # drops: its own
                                    reads.generation_statuses(slug), judge.rubric_overrides)
        except MissingLengths as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        if scored.not_scored:
            context.log.warning(f"long_scores {slug}: {scored.not_scored}")
        fp = own_fingerprint(context, config, models.spec(slug).fingerprint())
        return versioned(scored.rows, fp, metadata=long_scores_metadata(
            context, scored.rows, scored.kept, scored.dropped, scored.headline_note, fp, slug)
            | {"not_scored": scored.not_scored or "none: every base and long length has scores"})

    return [metric_scores, prior_knowledge, long_scores]
