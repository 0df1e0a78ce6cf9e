"""LV-Eval's assets (group ``lveval``): confusing_facts and replacement_rules, the inputs of the QA
suite's CFI / KPR rows, and lveval_ablation, the paper's ablation of them (spec lveval.md §5, §6, §9.8).

Wiring only: which items (benchmarks/qa/items.py), the facts and rules with their metadata and
checks (benchmarks/lveval/inputs.py), the variant rows (benchmarks/lveval/variants.py, used by
``instances``) and the ablation table (benchmarks/lveval/ablation.py) are pure modules.
"""

import dagster as dg
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.assets.common import (
    ALL_SOURCES,
    check_result,
    json_metadata,
    preview,
    source_frames,
)
from lc_pipeline.assets.versions import (
    declared,
    fact_generator_fingerprint,
    own_fingerprint,
    versioned,
)
from lc_pipeline.benchmarks.lveval.ablation import (
    ablation_frame,
    ablation_metadata,
    level_scores,
)
from lc_pipeline.benchmarks.lveval.config import KNOWLEDGE_BASE_FACTS
from lc_pipeline.benchmarks.lveval.inputs import (
    CHECK_FACTS,
    CHECK_RULES,
    FACTS_CHECK_DESCRIPTION,
    RULES_CHECK_DESCRIPTION,
    corpus_texts,
    facts_metadata,
    make_facts,
    make_rules,
    rule_problems,
    rules_metadata,
)
from lc_pipeline.benchmarks.qa.items import items_for_variants
from lc_pipeline.construct.confusing_facts import fact_problems, facts_frame
from lc_pipeline.construct.instance_checks import CheckResult
from lc_pipeline.construct.replacement import rules_frame
from lc_pipeline.fingerprints import INSTANCE_FIELDS, LVEVAL_FIELDS
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, ModelsResource, TokenizerResource
from lc_pipeline.tasks.catalog import catalog_for


def build(parts: Partitions) -> list:
    @dg.asset(
        ins={"source_items": ALL_SOURCES, "source_documents": ALL_SOURCES},
        group_name="lveval", **declared("1", LVEVAL_FIELDS, adds=("fact_generator",), serves="constructed"),
        kinds={"parquet"},
        description=(
            "LV-Eval CFI: per QA-suite item, facts that read like its evidence but are about another subject "
            "(knowledge-base siblings or an LLM), each candidate with its verdict and rejection reason"
        ),
        check_specs=[dg.AssetCheckSpec(CHECK_FACTS, asset="confusing_facts", blocking=True,
                                       description=FACTS_CHECK_DESCRIPTION)],
    )
    def confusing_facts(context: dg.AssetExecutionContext, source_items: pl.DataFrame, source_documents: pl.DataFrame,
                        benchmark: BenchmarkResource, tokenizer: TokenizerResource, models: ModelsResource):
        config = benchmark.load()
        items, documents = source_frames(config, source_items, source_documents)
        chosen, out = items.clear(), schemas.empty("confusing_facts")
        if config.lveval.wants_cfi:
            chosen = items_for_variants(items, documents, config, tokenizer.counter(), catalog_for(config))
            try:
                generator = (None if config.lveval.fact_generator == KNOWLEDGE_BASE_FACTS
                             else models.generator(config.lveval.fact_generator))  # unknown slug: the registry names it
                out = facts_frame(make_facts(items, documents, chosen, config, generator, context.log))
            except ValueError as exc:
                raise dg.Failure(f"confusing_facts: {exc}", allow_retries=False) from exc
        made_by = fact_generator_fingerprint(config, models) or None
        yield versioned(out, own_fingerprint(context, config, made_by), metadata={
            "enabled": config.lveval.wants_cfi,
            "generator": config.lveval.fact_generator,
            **json_metadata(facts_metadata(out, chosen)),
            "preview": preview(out.select("item_id", "accepted", "subject", "text", "reason"), n=10),
        })
        yield check_result(CheckResult(CHECK_FACTS, fact_problems(out, chosen)))

    @dg.asset(
        ins={"source_items": ALL_SOURCES, "source_documents": ALL_SOURCES},
        group_name="lveval", **declared("1", LVEVAL_FIELDS, adds=("fact_generator",), serves="constructed"),
        kinds={"parquet"},
        description=(
            "LV-Eval KPR: per QA-suite item, old term -> invented new term (a rules file and/or proposals for the "
            "names in answer, question and evidence); applied to question, answers, keywords, context and facts"
        ),
        check_specs=[dg.AssetCheckSpec(CHECK_RULES, asset="replacement_rules", blocking=True,
                                       description=RULES_CHECK_DESCRIPTION)],
    )
    def replacement_rules(context: dg.AssetExecutionContext, source_items: pl.DataFrame,
                          source_documents: pl.DataFrame, confusing_facts: pl.DataFrame, benchmark: BenchmarkResource,
                          tokenizer: TokenizerResource, models: ModelsResource):
        config = benchmark.load()
        items, documents = source_frames(config, source_items, source_documents)
        chosen, out, meta = items.clear(), schemas.empty("replacement_rules"), {}
        if config.lveval.wants_kpr:
            chosen = items_for_variants(items, documents, config, tokenizer.counter(), catalog_for(config))
            try:
                rules, meta = make_rules(items, documents, chosen, confusing_facts, config)
            except ValueError as exc:
                raise dg.Failure(f"replacement_rules: {exc}", allow_retries=False) from exc
            out = rules_frame(rules)
        made_by = fact_generator_fingerprint(config, models) or None
        yield versioned(out, own_fingerprint(context, config, made_by), metadata={
            "enabled": config.lveval.wants_kpr,
            **json_metadata(rules_metadata(out, chosen, meta)),
            "preview": preview(out.select("item_id", "old", "new", "origin"), n=10),
        })
        problems = rule_problems(out, chosen, corpus_texts(items, documents, confusing_facts)) if out.height else []
        yield check_result(CheckResult(CHECK_RULES, problems))

    @dg.asset(
        partitions_def=parts.model,
        ins={
            "metric_scores": dg.AssetIn(
                partition_mapping=dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=MODEL_DIM),
                metadata={"allow_missing_partitions": True},
            ),
            "instances": dg.AssetIn(partition_mapping=dg.AllPartitionMapping(),
                                    metadata={"allow_missing_partitions": True}),
        },
        group_name="lveval", **declared("1", INSTANCE_FIELDS, adds=("model",), serves="constructed"),
        kinds={"parquet"},
        description=(
            "LV-Eval's ablation (its Tables 8-9) per model and level: keyword-recall scores on plain vs CFI vs KPR "
            "vs CFI+KPR instances of the same items, per task and as the level score (task = 'all')"
        ),
    )
    def lveval_ablation(context: dg.AssetExecutionContext, metric_scores: pl.DataFrame, instances: pl.DataFrame,
                        benchmark: BenchmarkResource, models: ModelsResource):
        config = benchmark.load()
        try:
            out = ablation_frame(metric_scores, instances, config.lveval.metric_variant)
        except ValueError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        model_fp = models.spec(context.partition_key).fingerprint()
        return versioned(out, own_fingerprint(context, config, model_fp), metadata={
            "metric_variant": config.lveval.metric_variant,
            **ablation_metadata(out),
            "table": preview(level_scores(out).select("length_level", "variant", "score", "n_instances"), n=40),
        })

    return [confusing_facts, replacement_rules, lveval_ablation]
