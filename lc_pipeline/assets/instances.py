"""instances: the benchmark itself, one partition per length level, with its quality checks.

A level is built and written in batches (the QA suite up to ``ITEMS_PER_BATCH`` items and
about ``assembly.BATCH_TOKENS`` prompt tokens at a time, each other suite as one batch): each
batch gets its LV-Eval variants, is checked, and becomes one row group of a staged Parquet file
that the IO manager publishes whole. Only a batch and a small per-row summary (ids, lengths)
are in memory at a time, whatever the level's size.
"""

import tempfile
from collections.abc import Iterator

import dagster as dg
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.assets.common import FINGERPRINT_KEY, check_result, preview
from lc_pipeline.assets.retrieval import ALL_SOURCES, configured_sources
from lc_pipeline.config import level_tokens
from lc_pipeline.construct.assembly import ITEMS_PER_BATCH, fitting_items, items_per_batch_at, iter_instance_batches
from lc_pipeline.construct.helmet import build_helmet
from lc_pipeline.construct.instance_checks import CHECKS, InstanceChecks
from lc_pipeline.construct.instance_metadata import (
    PREVIEW_COLUMNS,
    SUMMARY_COLUMNS,
    length_histogram_markdown,
    level_metadata,
)
from lc_pipeline.construct.longbench100 import build_longbench100
from lc_pipeline.construct.lveval_levels import (
    build_factrecall_instances,
    build_word_level_instances,
    with_length_units,
)
from lc_pipeline.construct.lveval_variants import add_variants, inserted_tokens, with_empty_variant_columns
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import Partitions
from lc_pipeline.progress import Progress
from lc_pipeline.resources import BenchmarkResource, TokenizerResource


def build(parts: Partitions) -> list:
    @dg.asset(
        ins={"source_items": ALL_SOURCES, "source_documents": ALL_SOURCES},
        partitions_def=parts.length,
        group_name="instances",
        kinds={"parquet"},
        description=(
            "Contexts assembled to the target length: evidence at the configured depths, the rest hard negatives "
            "then same-domain documents; exact cl100k_base token counts on every row"
        ),
        check_specs=[dg.AssetCheckSpec(name, asset="instances", blocking=True, description=description)
                     for name, description in CHECKS.items()],
    )
    def instances(
        context: dg.AssetExecutionContext,
        source_items: pl.DataFrame,
        source_documents: pl.DataFrame,
        passages: pl.DataFrame,
        hard_negatives: pl.DataFrame,
        confusing_facts: pl.DataFrame,
        replacement_rules: pl.DataFrame,
        benchmark: BenchmarkResource,
        tokenizer: TokenizerResource,
    ):
        config = benchmark.load()
        level = context.partition_key
        items = configured_sources(source_items, config, "source_items").select(schemas.SOURCE_ITEMS.names())
        documents = configured_sources(source_documents, config, "source_documents").select(
            schemas.SOURCE_DOCUMENTS.names()
        )
        counter = tokenizer.counter()
        meta: dict = {}
        checks = InstanceChecks(config, documents, confusing_facts, replacement_rules)
        summaries = []
        with tempfile.TemporaryDirectory(prefix="lcp-instances-") as scratch:
            with storage.ParquetStager(scratch, schema=schemas.INSTANCES) as stage:
                for batch in _batches(context, items, documents, passages, hard_negatives, confusing_facts,
                                      replacement_rules, level, config, counter, meta):
                    out = schemas.conform(with_length_units(with_empty_variant_columns(batch), level, config),
                                          "instances")
                    # CFI rows carry their facts on top of the level (LV-Eval inserts after mixing): the length
                    # check measures them without the facts, whose tokens go to the metadata.
                    fact_tokens = inserted_tokens(out, counter)
                    checks.add(out, fact_tokens)
                    summaries.append(out.select(*SUMMARY_COLUMNS).with_columns(fact_tokens=fact_tokens))
                    stage.write(out)
                    del batch, out  # the next batch is built without this one in memory
                staged = stage.finish()
            summary = pl.concat(summaries)
            yield dg.Output(staged, metadata={
                FINGERPRINT_KEY: stage_fingerprint("instances", config),
                **level_metadata(summary, meta, level, config),
                "preview": preview(summary.select(*PREVIEW_COLUMNS)),
                # Markdown, not a PNG: a partition's run then never imports matplotlib (~1.5 s) nor renders
                # (~0.2 s); `lcp report` draws the figure (plots.token_length_histogram) from the lake.
                "token_length_histogram": dg.MetadataValue.md(length_histogram_markdown(summary)),
            })
        for result in checks.results():
            yield check_result(result)

    return [instances]


def _batches(context, items, documents, passages, hard_negatives, facts, rules, level, config, counter,
             meta: dict) -> Iterator[pl.DataFrame]:
    """The level's rows batch by batch: the QA suite (plain rows, each followed by its LV-Eval
    variants; factrecall rows last), then 100-LongBench, then HELMET. Fills ``meta`` as it goes."""
    n_qa = -(-config.items_per_length // _items_per_batch(level, config)) if config.length_unit == "tokens" else 1
    progress = Progress(context.log, (n_qa + bool(config.lveval.factrecall_positions)) * bool(config.items_per_length)
                        + bool(config.longbench100.tasks) + bool(config.helmet.tasks),
                        f"instances {level}", unit="batch", every_s=0)
    if config.items_per_length:
        for plain in _qa_batches(items, documents, passages, hard_negatives, level, config, counter, meta):
            try:  # LV-Eval: CFI / KPR rows after each plain row, as the config's lveval.variants asks
                qa, variant_meta = add_variants(plain, facts, rules, config, counter)
            except ValueError as exc:
                raise dg.Failure(f"LV-Eval variants at {level}: {exc}", allow_retries=False) from exc
            del plain  # a generator's locals live on while the consumer builds the next batch
            for key, n in variant_meta.items():
                meta[key] = meta.get(key, 0) + n
            yield qa
            del qa
            progress.update()
    if config.longbench100.tasks:
        try:
            yield build_longbench100(
                documents, items, level=level, n_per_task=config.longbench100.n_per_task, seed=config.seed,
                counter=counter, tasks=config.longbench100.tasks,
            )
        except ValueError as exc:
            raise dg.Failure(f"100-LongBench instances at {level}: {exc}", allow_retries=False) from exc
        progress.update()
    if config.helmet.tasks:
        try:
            yield build_helmet(
                documents, items, passages, hard_negatives, level=level, config=config.helmet, seed=config.seed,
                counter=counter, length_tolerance=config.length_tolerance,
            )
        except ValueError as exc:
            raise dg.Failure(f"HELMET instances at {level}: {exc}", allow_retries=False) from exc
        progress.update()
    progress.close()


def _items_per_batch(level: str, config) -> int:
    # Each item makes a row per depth and LV-Eval variant; a batch holds ~BATCH_TOKENS prompt tokens.
    return items_per_batch_at(level_tokens(level), len(config.depths) * len(config.lveval.variants), ITEMS_PER_BATCH)


def _qa_batches(items, documents, passages, hard_negatives, level, config, counter, meta: dict
                ) -> Iterator[pl.DataFrame]:
    """The QA suite's plain rows in batches (:func:`_items_per_batch`), then LV-Eval's factrecall
    rows when ``lveval.factrecall_positions`` asks for them."""
    # Items whose evidence alone overflows the smallest level are left out at every level
    # (levels share their items), and counted in the metadata.
    if config.length_unit == "words":  # LV-Eval's construction (construct/lveval_levels.py)
        try:
            out, word_meta = build_word_level_instances(items, documents, level=level, config=config, counter=counter)
        except ValueError as exc:
            raise dg.Failure(f"instances {level} (words): {exc}", allow_retries=False) from exc
        meta.update(word_meta)
        yield out
    else:
        smallest = min(level_tokens(lv) for lv in config.lengths)
        eligible, too_long = fitting_items(items, documents, counter, smallest)
        if eligible.height < config.items_per_length:
            raise dg.Failure(
                f"only {eligible.height} of {items.height} items fit the smallest level ({smallest} tokens) with "
                f"their evidence; items_per_length is {config.items_per_length}: lower it or raise the smallest level",
                allow_retries=False,
            )
        meta.update(items_eligible=eligible.height, items_too_long_for_smallest_level=too_long.height,
                    instances_with_cross_domain_fillers=0)
        domain = dict(documents.select("doc_id", "domain").iter_rows())
        for out in iter_instance_batches(eligible, documents, passages, hard_negatives, level=level, config=config,
                                         counter=counter, items_per_batch=_items_per_batch(level, config)):
            meta["instances_with_cross_domain_fillers"] += sum(
                any(domain.get(d.removesuffix(":cut"), own) not in own for d in ctx)
                for ev, ctx in out.select("evidence_doc_ids", "context_doc_ids").iter_rows()
                for own in [{domain[d] for d in ev}]
            )
            yield out
            del out
    if config.lveval.factrecall_positions:
        try:
            yield build_factrecall_instances(items, documents, level=level, config=config, counter=counter)
        except ValueError as exc:
            raise dg.Failure(f"factrecall instances at {level}: {exc}", allow_retries=False) from exc
