"""citation_scores: ALCE citation recall and precision per (length, model) partition, NLI-judged
(score/citations.py; the judge from the nli resource, score/nli.py)."""

import dagster as dg
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.assets.common import preview
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.fingerprints import INSTANCE_FIELDS
from lc_pipeline.ids import short_id
from lc_pipeline.partitions import LENGTH_DIM, MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, ModelsResource
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.resources.nli import NLIResource
from lc_pipeline.score.citations import citation_frame, plan_citations, score_outputs
from lc_pipeline.tasks.catalog import catalog_for

TABLE = "citation_scores"


def build(parts: Partitions) -> list:
    @dg.asset(
        partitions_def=parts.length_x_model,
        group_name="citations", **declared("1", INSTANCE_FIELDS, adds=("model",), runs="cited"),
        kinds={"parquet"},
        description=(
            "ALCE citation recall and precision (HELMET Cite) of every generation whose task declares them: one row "
            "per metric with the NLI judge used, every sentence / citation check with its verdict and parse status. "
            "Verdicts cached by (backend, premise, hypothesis): a rerun asks nothing already answered"
        ),
    )
    def citation_scores(
        context: dg.AssetExecutionContext,
        generations: pl.DataFrame,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
        judge: JudgeResource,
        nli: NLIResource,
    ):
        config = benchmark.load()
        dims = context.partition_key.keys_by_dimension
        where = f"citation_scores {dims[LENGTH_DIM]}|{dims[MODEL_DIM]}"
        catalog = catalog_for(config)
        try:
            items = plan_citations(generations.select(schemas.GENERATIONS.names()),
                                   instances.select(schemas.INSTANCES.names()), catalog)
        except ValueError as exc:
            raise dg.Failure(f"{where}: {exc}", allow_retries=False) from exc
        base = models.spec(dims[MODEL_DIM]).fingerprint()
        if not items:
            return versioned(schemas.empty(TABLE), own_fingerprint(context, config, base + catalog.fingerprint()), metadata={
                "note": "no generation of this partition has a task with NLI metrics"})
        tasks = sorted({i.instance["task"] for i in items})
        try:
            default = (config.nli.backend, config.nli.model) if config.nli is not None else ("", "")
            judge_nli = nli.nli_judge(judge, models, default)
        except ValueError as exc:
            raise dg.Failure(f"{where}: tasks {tasks} declare citation metrics: {exc}", allow_retries=False) from exc
        rounds: list[int] = []

        def entails_many(pairs):
            rounds.append(len(pairs))
            context.log.info(f"NLI {judge_nli.description}: round {len(rounds)}, {len(pairs)} questions")
            return judge_nli.entails_many(pairs)

        out = citation_frame(items, score_outputs([i.input for i in items], entails_many), judge_nli.description)
        unparsed = int(out["n_unparsed"].sum())
        if unparsed:
            context.log.warning(f"{unparsed} NLI verdicts could not be read (counted as not entailed)")
        means = out.group_by("task", "metric").agg(pl.col("score").mean()).sort("task", "metric")
        nli_id = short_id(judge_nli.backend.identity, catalog.fingerprint())
        return versioned(out, own_fingerprint(context, config, base + nli_id), metadata={
            "nli_backend": judge_nli.description,
            "nli_calls": judge_nli.calls,
            "cache_hits": judge_nli.cache_hits,
            "rounds": dg.MetadataValue.json(rounds),
            "rows": out.height,
            "unparsed_verdicts": unparsed,
            "parse_statuses": dg.MetadataValue.json(dict(sorted(out.group_by("parse_status").len().iter_rows()))),
            "mean_scores": dg.MetadataValue.json({f"{t}/{m}": s for t, m, s in means.iter_rows()}),
            "preview": preview(out.select("task", "metric", "score", "n_sentences", "n_checks", "parse_status")),
        })

    return [citation_scores]
