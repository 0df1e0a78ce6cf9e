"""instances: the benchmark itself, one partition per length level, with its quality checks.

Which tasks a level builds, and with which registered builder, comes from the task files and the
config (construct/builders.py). A level is built and written in batches (the QA suite up to
``ITEMS_PER_BATCH`` items and about ``assembly.BATCH_TOKENS`` prompt tokens at a time, each other
builder as one batch): each batch is checked and becomes one row group of a staged Parquet file
that the IO manager publishes whole. Only a batch and a small per-row summary (ids, lengths) are
in memory at a time, whatever the level's size.
"""

import tempfile

import dagster as dg
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.assets.common import ALL_SOURCES, check_result, preview, source_frames
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.construct.builders import (
    BuildError,
    LevelInputs,
    level_batches,
    planned_batches,
)
from lc_pipeline.construct.instance_checks import InstanceChecks, check_descriptions
from lc_pipeline.construct.instance_metadata import (
    PREVIEW_COLUMNS,
    SUMMARY_COLUMNS,
    length_histogram_markdown,
    level_metadata,
)
from lc_pipeline.construct.run_selection import Narrowed, narrowed
from lc_pipeline.construct.variant_rows import inserted_tokens
from lc_pipeline.fingerprints import INSTANCE_FIELDS, INSTANCES_CODE_VERSION, instances_fingerprint
from lc_pipeline.lake import record_built_by
from lc_pipeline.partitions import Partitions
from lc_pipeline.progress import Progress
from lc_pipeline.resources import BenchmarkResource, LakeResource, TokenizerResource
from lc_pipeline.tasks.catalog import catalog_for


def build(parts: Partitions) -> list:
    """The instances asset of constructed configs, and the one of a config that runs a published benchmark as
    released (``released:``), which reads only the sources (no passages, hard negatives, confusing facts or
    rules: none is used); each declares which configs it serves (assets/versions.py)."""
    def spec(released: bool) -> dict:
        return dict(
            **declared(INSTANCES_CODE_VERSION, INSTANCE_FIELDS, serves="released" if released else "constructed"),
            ins={"source_items": ALL_SOURCES, "source_documents": ALL_SOURCES},
            partitions_def=parts.length,
            group_name="instances",
            kinds={"parquet"},
            description=(
                "One instance per released record, its context verbatim, prompted by its task; the level is the "
                "benchmark's own group (config released:); exact token counts on every row" if released else
                "Contexts assembled to the target length: evidence at the configured depths, the rest hard negatives "
                "then same-domain documents; exact cl100k_base token counts on every row"
            ),
            check_specs=[dg.AssetCheckSpec(name, asset="instances", blocking=True, description=description)
                         for name, description in check_descriptions().items()],
        )

    @dg.asset(name="instances", **spec(True))
    def released_instances(context: dg.AssetExecutionContext, source_items: pl.DataFrame,
                           source_documents: pl.DataFrame, benchmark: BenchmarkResource,
                           tokenizer: TokenizerResource, lake: LakeResource):
        unused = [schemas.empty(t) for t in ("passages", "hard_negatives", "confusing_facts", "replacement_rules")]
        yield from _instances(context, source_items, source_documents, *unused, benchmark, tokenizer, lake)

    @dg.asset(**spec(False))
    def instances(context: dg.AssetExecutionContext, source_items: pl.DataFrame, source_documents: pl.DataFrame,
                  passages: pl.DataFrame, hard_negatives: pl.DataFrame, confusing_facts: pl.DataFrame,
                  replacement_rules: pl.DataFrame, benchmark: BenchmarkResource, tokenizer: TokenizerResource,
                  lake: LakeResource):
        yield from _instances(context, source_items, source_documents, passages, hard_negatives, confusing_facts,
                              replacement_rules, benchmark, tokenizer, lake)

    return [released_instances, instances]


def _instances(context: dg.AssetExecutionContext, source_items: pl.DataFrame, source_documents: pl.DataFrame,
               passages: pl.DataFrame, hard_negatives: pl.DataFrame, confusing_facts: pl.DataFrame,
               replacement_rules: pl.DataFrame, benchmark: BenchmarkResource, tokenizer: TokenizerResource,
               lake: LakeResource):
    """Build, check and write one level (both assets' body), then record which config built it (lake.built_by:
    a run from the UI or a sensor records it as `lcp` does)."""
    config = benchmark.load()
    level = context.partition_key
    items, documents = source_frames(config, source_items, source_documents)
    inputs = LevelInputs(items, documents, passages, hard_negatives, confusing_facts, replacement_rules, level,
                         config, tokenizer.counter(), catalog_for(config))
    counter, meta = inputs.counter, inputs.meta
    checks = InstanceChecks(config, documents, confusing_facts, replacement_rules)
    summaries = []
    selection = Narrowed(config.only) if config.only is not None else None  # lcp run --tasks / --limit
    progress = Progress(context.log, planned_batches(inputs), f"instances {level}", unit="batch", every_s=0)
    with tempfile.TemporaryDirectory(prefix="lcp-instances-") as scratch:
        with storage.ParquetStager(scratch, schema=schemas.INSTANCES) as stage:
            try:
                for out in narrowed(level_batches(inputs, progress.update), selection):
                    # CFI rows carry their facts on top of the level (LV-Eval inserts after mixing): the
                    # length check measures them without the facts, whose tokens go to the metadata.
                    fact_tokens = inserted_tokens(out, counter)
                    checks.add(out, fact_tokens)
                    summaries.append(out.select(*SUMMARY_COLUMNS).with_columns(fact_tokens=fact_tokens))
                    stage.write(out)
                    del out  # the next batch is built without this one in memory
            except BuildError as exc:
                raise dg.Failure(str(exc), allow_retries=False) from exc
            except ValueError as exc:  # e.g. an item whose task no task file declares
                raise dg.Failure(f"instances {level}: {exc}", allow_retries=False) from exc
            progress.close()
            staged = stage.finish()
        if not summaries:  # only with a selection: a builder's level always has rows (InstanceChecks)
            raise dg.Failure(f"instances {level}: the selection kept no instance "
                             f"({selection.metadata() if selection is not None else {}})", allow_retries=False)
        summary = pl.concat(summaries)
        fingerprint = own_fingerprint(context, config)
        yield versioned(staged, fingerprint, metadata={
            **level_metadata(summary, meta, level, config),
            "preview": preview(summary.select(*PREVIEW_COLUMNS)),
            # Markdown, not a PNG: a partition's run then never imports matplotlib (~1.5 s) nor renders
            # (~0.2 s); `lcp report` draws the figure (plots.token_length_histogram) from the lake.
            "token_length_histogram": dg.MetadataValue.md(length_histogram_markdown(summary)),
            **({"selection": dg.MetadataValue.json(selection.metadata())} if selection is not None else {}),
        })
    record_built_by(lake.base_dir, level, config.name, fingerprint)  # after the data
    for result in checks.results():
        yield check_result(result)
