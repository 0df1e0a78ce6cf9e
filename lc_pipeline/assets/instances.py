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
import numpy as np
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.assets import lveval
from lc_pipeline.assets.common import FINGERPRINT_KEY, Progress, preview
from lc_pipeline.assets.retrieval import ALL_SOURCES, configured_sources
from lc_pipeline.config import level_tokens
from lc_pipeline.construct.assembly import ITEMS_PER_BATCH, fitting_items, items_per_batch_at, iter_instance_batches
from lc_pipeline.construct.longbench100 import LABEL_TOKENS, build_longbench100
from lc_pipeline.construct.longbench100 import SUITE as LB100_SUITE
from lc_pipeline.construct.helmet import SUITE as HELMET_SUITE
from lc_pipeline.construct.helmet import build_helmet, gold_depth_violations
from lc_pipeline.construct.lveval_levels import (
    build_factrecall_instances,
    build_word_level_instances,
    with_length_units,
)
from lc_pipeline.construct.replacement import rules_by_item
from lc_pipeline.construct.variants import kpr_problems
from lc_pipeline.construct.word_levels import count_units
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import BenchmarkResource, TokenizerResource

CHECK_LENGTH = "within_length_tolerance"
CHECK_EVIDENCE = "contains_evidence"
CHECK_KEYWORDS = "answer_keywords_in_evidence"
CHECK_RAG_DEPTHS = "helmet_rag_gold_at_depths"


def length_violations(instances: pl.DataFrame, tolerance: float) -> pl.DataFrame:
    """Rows off their target length.

    QA-suite rows must be within ``tolerance`` of the target: prompt tokens, or for LV-Eval's
    word levels (``length_unit`` words / characters) the context's words without inserted
    facts (``context_units_without_facts`` when the frame has it). 100-LongBench
    rows follow the paper's greedy fill, which budgets raw document tokens strictly under
    the target and leaves labels unbudgeted: their context must stay under
    ``target + blocks * LABEL_TOKENS`` (spec 100longbench.md §11).
    """
    words = pl.col("length_unit").is_in(["words", "characters"]) if "length_unit" in instances.columns else pl.lit(False)
    units = (pl.col("context_units_without_facts") if "context_units_without_facts" in instances.columns
             else pl.col("context_units") if "context_units" in instances.columns else pl.lit(None))
    err = pl.when(words).then((units - pl.col("target_units")).abs() / pl.col("target_units")).otherwise(
        (pl.col("input_tokens") - pl.col("target_tokens")).abs() / pl.col("target_tokens"))
    lb100_limit = pl.col("target_tokens") + pl.col("context_doc_ids").list.len() * LABEL_TOKENS
    bad = pl.when(pl.col("suite") == LB100_SUITE).then(pl.col("context_tokens") >= lb100_limit).otherwise(
        pl.col("rel_error") > tolerance
    )
    return instances.with_columns(rel_error=err).filter(bad)


def evidence_violations(
    instances: pl.DataFrame, documents: pl.DataFrame, rules: pl.DataFrame | None = None
) -> list[str]:
    """Instances whose context lacks the (whitespace-trimmed) text of one of their evidence documents.

    LV-Eval variant rows are checked with their variant undone (facts taken out, the item's
    ``rules`` applied to the evidence; see assets/lveval.py).
    """
    text = dict(documents.select("doc_id", "text").iter_rows())
    variants = instances.filter(pl.col("variant") != "plain") if "variant" in instances.columns else instances.clear()
    return [
        iid
        for iid, ev, ctx in instances.filter(~pl.col("instance_id").is_in(variants["instance_id"].implode()))
        .select("instance_id", "evidence_doc_ids", "context").iter_rows()
        if any(text[d].strip() not in ctx for d in ev)
    ] + (lveval.evidence_problems(variants, documents, rules)[0] if variants.height else [])


def keyword_violations(
    instances: pl.DataFrame, documents: pl.DataFrame, rules: pl.DataFrame | None = None
) -> list[str]:
    """Instances with an answer keyword that their evidence does not contain.

    The evidence is the evidence documents' text, or the context when the answer lives in
    inserted needles (100-LongBench KV retrieval: no evidence documents). LV-Eval KPR rows:
    keywords and evidence rewritten by the item's ``rules`` (assets/lveval.py).
    """
    text = dict(documents.select("doc_id", "text").iter_rows())
    variants = instances.filter(pl.col("variant") != "plain") if "variant" in instances.columns else instances.clear()
    bad = lveval.evidence_problems(variants, documents, rules)[1] if variants.height else []
    plain = instances.filter(~pl.col("instance_id").is_in(variants["instance_id"].implode()))
    for iid, ev, kws, ctx in plain.select("instance_id", "evidence_doc_ids", "answer_keywords", "context").iter_rows():
        evidence = (" ".join(text[d] for d in ev) if ev else ctx).casefold()
        if any(k.casefold() not in evidence for k in kws):
            bad.append(iid)
    return bad


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
        check_specs=[
            dg.AssetCheckSpec(CHECK_LENGTH, asset="instances", blocking=True,
                              description="every instance is within the config's tolerance of its target length"),
            dg.AssetCheckSpec(CHECK_EVIDENCE, asset="instances", blocking=True,
                              description="every instance's context contains its evidence documents verbatim"),
            dg.AssetCheckSpec(CHECK_KEYWORDS, asset="instances", blocking=True,
                              description="every answer keyword occurs in the instance's evidence documents"),
            *lveval.VARIANT_CHECK_SPECS,
            dg.AssetCheckSpec(CHECK_RAG_DEPTHS, asset="instances", blocking=True,
                              description="HELMET RAG: the gold passage sits at each of the evenly spaced depths"),
        ],
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
        checks = _Checks(config, documents, confusing_facts, replacement_rules)
        summaries = []
        with tempfile.TemporaryDirectory(prefix="lcp-instances-") as scratch:
            with storage.ParquetStager(scratch, schema=schemas.INSTANCES) as stage:
                for batch in _batches(context, items, documents, passages, hard_negatives, confusing_facts,
                                      replacement_rules, level, config, counter, meta):
                    out = schemas.conform(with_length_units(lveval.with_empty_variant_columns(batch), level, config),
                                          "instances")
                    # CFI rows carry their facts on top of the level (LV-Eval inserts after mixing): the length
                    # check measures them without the facts, whose tokens go to the metadata.
                    fact_tokens = lveval.inserted_tokens(out, counter)
                    checks.add(out, fact_tokens)
                    summaries.append(out.select(*SUMMARY_COLUMNS).with_columns(fact_tokens=fact_tokens))
                    stage.write(out)
                    del batch, out  # the next batch is built without this one in memory
                staged = stage.finish()
            summary = pl.concat(summaries)
            yield dg.Output(staged, metadata={
                FINGERPRINT_KEY: stage_fingerprint("instances", config),
                **_metadata(summary, meta, level, config),
            })
        yield from checks.results()

    return [instances]


# Per-row columns kept for the metadata once a batch is written: small (no context or prompt).
SUMMARY_COLUMNS = ("instance_id", "suite", "task", "variant", "insertions", "depth", "question", "input_tokens",
                   "target_tokens", "length_unit", "target_units", "context_units")


def _metadata(summary: pl.DataFrame, meta: dict, level: str, config) -> dict:
    rel = ((summary["context_units"] - summary["target_units"]).abs() / summary["target_units"]).filter(
        summary["length_unit"] != "tokens").append(
        ((summary["input_tokens"] - summary["target_tokens"]).abs() / summary["target_tokens"]).filter(
            summary["length_unit"] == "tokens")).max()
    return {
        "instances": summary.height,
        **{f"instances_{suite}": n for suite, n in summary.group_by("suite").len().sort("suite").iter_rows()},
        **meta,
        **lveval.variant_metadata(summary, summary["fact_tokens"]),
        "length_unit": config.length_unit,
        **({"target_tokens": config.target_tokens(level)} if config.length_unit == "tokens" else
           {"target_words": int(summary["target_units"].max())}),
        "tokenizer": config.tokenizer,
        "input_tokens_min": int(summary["input_tokens"].min()),
        "input_tokens_max": int(summary["input_tokens"].max()),
        "max_relative_length_error": float(rel),
        "preview": preview(summary.select("instance_id", "suite", "task", "depth", "input_tokens", "question")),
        # Markdown, not a PNG: a partition's run then never imports matplotlib (~1.5 s) nor renders
        # (~0.2 s); `lcp report` draws the figure (plots.token_length_histogram) from the lake.
        "token_length_histogram": dg.MetadataValue.md(length_histogram_markdown(summary)),
    }


def length_histogram_markdown(summary: pl.DataFrame, bins: int = 10) -> str:
    """Prompt tokens per instance as a markdown table: a row per bin (its range, count and a bar),
    the bins holding a target token length marked."""
    if summary.is_empty():
        return "no instances"
    tokens = summary["input_tokens"].to_numpy()
    lo, hi = int(tokens.min()), int(tokens.max())
    counts, edges = np.histogram(tokens, bins=min(bins, hi - lo + 1), range=(lo, hi + 1))
    starts = np.ceil(edges).astype(np.int64)  # integer bins: [starts[i], starts[i + 1] - 1]
    targets = sorted(int(t) for t in summary["target_tokens"].drop_nulls().unique())
    target = ", ".join(f"{t:,}" for t in targets) or "in words"
    lines = [f"prompt tokens per instance ({len(tokens)} instances; target {target})", "",
             "| prompt tokens | instances | |", "|---|---:|---|"]
    for i, n in enumerate(counts):
        first, last = int(starts[i]), int(starts[i + 1]) - 1
        span = f"{first:,}" if first == last else f"{first:,} – {last:,}"
        mark = " ◀ target" if any(first <= t <= last for t in targets) else ""
        lines.append(f"| {span}{mark} | {n} | {'█' * round(20 * n / counts.max())} |")
    return "\n".join(lines)


class _Checks:
    """The asset checks of ``instances``, run on each batch; violations accumulate across batches."""

    def __init__(self, config, documents: pl.DataFrame, facts: pl.DataFrame, rules: pl.DataFrame) -> None:
        self.config, self.documents, self.facts, self.rules = config, documents, facts, rules
        self.rules_by_item = rules_by_item(rules)
        self.too_far: list[str] = []
        # Plain and variant rows apart: the checks list them in the same order whatever the batches.
        self.missing: dict[bool, list[str]] = {False: [], True: []}  # by "is a variant row"
        self.bad_keywords: dict[bool, list[str]] = {False: [], True: []}
        self.kpr: list[str] = []
        self.spans: list[str] = []
        self.rag: list[pl.DataFrame] = []  # HELMET RAG rows' ids and block ids: the depth check spans rows

    def add(self, out: pl.DataFrame, fact_tokens: pl.Series) -> None:
        # Word-level CFI rows are measured without their facts (only they: contexts are large to copy out).
        units = out["context_units"].to_list()
        for i, ctx, ins, lang in out.with_row_index("i").filter(
            (pl.col("length_unit") != "tokens") & (pl.col("insertions").list.len() > 0)
        ).select("i", "context", "insertions", "language").iter_rows():
            units[i] = count_units(lveval.without_insertions(ctx, ins, lang), lang if lang in ("en", "zh") else "en")
        without_facts = pl.Series(units, dtype=pl.Int64)
        self.too_far += length_violations(out.with_columns(input_tokens=pl.col("input_tokens") - fact_tokens,
                                                           context_units_without_facts=without_facts),
                                          self.config.length_tolerance)["instance_id"].to_list()
        whole_docs = out.filter(pl.col("suite") != HELMET_SUITE)  # HELMET holds passages, cut documents, pairs
        for variant_rows in (False, True):
            rows = whole_docs.filter((pl.col("variant") != "plain") == variant_rows)
            self.missing[variant_rows] += evidence_violations(rows, self.documents, self.rules)
            self.bad_keywords[variant_rows] += keyword_violations(rows, self.documents, self.rules)
        self.kpr += kpr_problems(out.filter(pl.col("variant").str.contains("kpr")).iter_rows(named=True),
                                 self.rules_by_item)
        self.spans += lveval.insertion_problems(out, self.facts, self.rules)
        self.rag.append(out.filter((pl.col("suite") == HELMET_SUITE) & (pl.col("task") == "rag")).select(
            "instance_id", "item_id", "suite", "task", "depth", "target_tokens", "evidence_doc_ids", "context_doc_ids"))

    def results(self) -> Iterator[dg.AssetCheckResult]:
        def result(name: str, problems: list[str], **extra) -> dg.AssetCheckResult:
            return dg.AssetCheckResult(check_name=name, passed=not problems, metadata={
                "violations": len(problems), **extra, "examples": dg.MetadataValue.json(problems[:5])})

        yield result(CHECK_LENGTH, self.too_far, tolerance=self.config.length_tolerance)
        yield result(CHECK_EVIDENCE, self.missing[False] + self.missing[True])
        yield result(CHECK_KEYWORDS, self.bad_keywords[True] + self.bad_keywords[False])
        yield result(lveval.CHECK_KPR, self.kpr)
        yield result(lveval.CHECK_INSERTIONS, self.spans)
        rag = pl.concat(self.rag)
        yield result(CHECK_RAG_DEPTHS, gold_depth_violations(rag, self.config.helmet.n_depths),
                     rag_instances=rag.height)


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
                qa, variant_meta = lveval.add_variants(plain, facts, rules, config, counter)
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
